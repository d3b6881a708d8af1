#!/usr/bin/python3
"""The 3-D U-Net and the partially reversible U-Net in plain PyTorch 1.13,
with revtorch's parameter names (src/models/unet.h), used to load revtorch's
weights into PyTorch, to check revtorch's forward against PyTorch's, and as
the PyTorch side of benchmarks.

Standard U-Net (UNet3d): encoders.L = [MaxPool3d(2) unless L = 0] then two
units conv{1,2} (3x3x3, no bias) -> norm{1,2} -> LeakyReLU(0.01); ups.L
upsamples level L+1 to level L (ConvTranspose3d(2, stride 2), or
ups.L.conv 1x1x1 then trilinear x2); decoders.L runs the two units on
cat([skip, up], 1); last_conv 1x1x1 gives the logits.

Partially reversible U-Net (PartiallyReversibleUNet3d, Bruegger et al.,
MICCAI 2019): first_conv 3x3x3 (no bias); encoders.L = [MaxPool3d(2),
conv 1x1x1 unless L = 0] then blocks (additive couplings y1 = x1 + F(x2),
y2 = x2 + G(y1), F and G = norm -> LeakyReLU(0.01) -> conv 3x3x3 on half
the channels); decoders.L = blocks then [conv 1x1x1 to level L-1's width,
trilinear x2 unless L = 0], whose output is added to the skip; last_conv.
With reversible=True each sequence of blocks runs as pytorch_revnet's
RevSequence Function (keeps only its output, rebuilds inputs in backward).

Both pad every spatial size up to a multiple of 2^(levels-1) with zeros at
the end of each axis and crop the logits back, as revtorch does.

Usage (what tests/test_pytorch_unet.sh runs):
    /usr/bin/python3 tools/pytorch_unet.py check FILE.safetensors...
Each FILE (written by `test_unet --export DIR`) holds a model's weights,
its configuration as metadata, an "input" and revtorch's "output"; the
model is built from the metadata, loaded with load_state_dict(strict=True),
run in training mode on the input, and its output compared with revtorch's
(max |diff| <= 1e-4 * max |output| + 1e-6). Exit 0 when every file matches.
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def make_norm(kind, channels, groups):
    if kind == "batch":
        return nn.BatchNorm3d(channels)
    if kind == "instance":
        return nn.InstanceNorm3d(channels, affine=True, track_running_stats=False)
    if kind == "group":
        return nn.GroupNorm(groups, channels)
    raise ValueError(f"unknown norm kind {kind!r} (batch, instance or group)")


def pad_to_multiple(x, mult):
    """Zero-pads D, H, W at their ends up to multiples of mult; returns (x, crop pads)."""
    extra = [(-s) % mult for s in x.shape[2:]]
    if not any(extra):
        return x, None
    pad = [0, extra[2], 0, extra[1], 0, extra[0]]  # F.pad: last dim first
    return F.pad(x, pad), [-p for p in pad]


class Level(nn.Module):
    """[MaxPool3d(2)] then two units conv -> norm -> LeakyReLU(0.01)."""

    def __init__(self, cin, width, norm, groups, pool):
        super().__init__()
        self.pool = nn.MaxPool3d(2) if pool else None
        self.conv1 = nn.Conv3d(cin, width, 3, padding=1, bias=False)
        self.norm1 = make_norm(norm, width, groups)
        self.conv2 = nn.Conv3d(width, width, 3, padding=1, bias=False)
        self.norm2 = make_norm(norm, width, groups)

    def forward(self, x):
        if self.pool is not None:
            x = self.pool(x)
        x = F.leaky_relu(self.norm1(self.conv1(x)), 0.01)
        return F.leaky_relu(self.norm2(self.conv2(x)), 0.01)


class TrilinearUp(nn.Module):
    """1x1x1 conv, then trilinear x2 (the two commute; the conv runs on fewer voxels)."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, 1)

    def forward(self, x):
        return F.interpolate(self.conv(x), scale_factor=2, mode="trilinear", align_corners=False)


class UNet3d(nn.Module):
    def __init__(self, widths, in_channels, num_classes, norm="group", groups=8, upsample="transposed"):
        super().__init__()
        self.levels = len(widths)
        self.encoders = nn.ModuleList(
            Level(widths[l - 1] if l else in_channels, widths[l], norm, groups, l > 0) for l in range(self.levels))
        if self.levels > 1:
            ups = []
            for l in range(self.levels - 1):
                if upsample == "transposed":
                    ups.append(nn.ConvTranspose3d(widths[l + 1], widths[l], 2, stride=2))
                else:
                    ups.append(TrilinearUp(widths[l + 1], widths[l]))
            self.ups = nn.ModuleList(ups)
            self.decoders = nn.ModuleList(
                Level(2 * widths[l], widths[l], norm, groups, False) for l in range(self.levels - 1))
        self.last_conv = nn.Conv3d(widths[0], num_classes, 1)

    def forward(self, x):
        x, crop = pad_to_multiple(x, 2 ** (self.levels - 1))
        skips = []
        for l, enc in enumerate(self.encoders):
            x = enc(x)
            if l < self.levels - 1:
                skips.append(x)
        for l in reversed(range(self.levels - 1)):
            x = self.decoders[l](torch.cat([skips[l], self.ups[l](x)], 1))
        x = self.last_conv(x)
        return F.pad(x, crop) if crop else x


class Inner(nn.Module):
    """F or G: norm -> LeakyReLU(0.01) -> conv 3x3x3 without bias (the paper's ResidualInner)."""

    def __init__(self, channels, norm, groups):
        super().__init__()
        self.norm = make_norm(norm, channels, groups)
        self.conv = nn.Conv3d(channels, channels, 3, padding=1, bias=False)

    def forward(self, x):
        return self.conv(F.leaky_relu(self.norm(x), 0.01))


class Coupling(nn.Module):
    """Additive coupling on a channel split (x1 has floor(C/2) channels)."""

    def __init__(self, channels, norm, groups):
        super().__init__()
        self.c1 = channels // 2
        self.f = Inner(channels - self.c1, norm, groups)
        self.g = Inner(self.c1, norm, groups)

    def forward(self, x):
        x1, x2 = x[:, :self.c1], x[:, self.c1:]
        y1 = x1 + self.f(x2)
        return torch.cat([y1, x2 + self.g(y1)], 1)


class RevLevel(nn.Module):
    """Encoder level: [pool, conv 1x1x1] then blocks; decoder level: blocks then [conv 1x1x1, trilinear x2]."""

    def __init__(self, width, n_blocks, norm, groups, reversible, before=None, after=None):
        super().__init__()
        self.reversible = reversible
        self.before, self.after = before, after
        if before is not None:
            self.pool = nn.MaxPool3d(2)
            self.conv = nn.Conv3d(before, width, 1)
        if n_blocks:
            self.blocks = nn.ModuleList(Coupling(width, norm, groups) for _ in range(n_blocks))
        else:
            self.blocks = None
        if after is not None:
            self.conv = nn.Conv3d(width, after, 1)

    def run_blocks(self, x):
        if self.blocks is None:
            return x
        if self.reversible and torch.is_grad_enabled():
            from pytorch_revnet import RevSequence
            units = list(self.blocks)
            return RevSequence.apply(x, units, *[p for u in units for p in u.parameters()])
        for b in self.blocks:
            x = b(x)
        return x

    def forward(self, x):
        if self.before is not None:
            x = self.conv(self.pool(x))
        x = self.run_blocks(x)
        if self.after is not None:
            x = F.interpolate(self.conv(x), scale_factor=2, mode="trilinear", align_corners=False)
        return x


class PartiallyReversibleUNet3d(nn.Module):
    def __init__(self, widths, in_channels, num_classes, norm="group", groups=8, enc_blocks=None, dec_blocks=None,
                 reversible=False):
        super().__init__()
        self.levels = n = len(widths)
        enc_blocks = enc_blocks or [1] * n
        dec_blocks = dec_blocks or [1] * n
        self.first_conv = nn.Conv3d(in_channels, widths[0], 3, padding=1, bias=False)
        self.encoders = nn.ModuleList(
            RevLevel(widths[l], enc_blocks[l], norm, groups, reversible, before=widths[l - 1] if l else None)
            for l in range(n))
        self.decoders = nn.ModuleList(
            RevLevel(widths[l], dec_blocks[l], norm, groups, reversible, after=widths[l - 1] if l else None)
            for l in range(n))
        self.last_conv = nn.Conv3d(widths[0], num_classes, 1)

    def forward(self, x):
        x, crop = pad_to_multiple(x, 2 ** (self.levels - 1))
        x = self.first_conv(x)
        skips = []
        for l, enc in enumerate(self.encoders):
            x = enc(x)
            if l < self.levels - 1:
                skips.append(x)
        for l in reversed(range(self.levels)):
            x = self.decoders[l](x)
            if l > 0:
                x = x + skips[l - 1]  # skips added, not concatenated
        x = self.last_conv(x)
        return F.pad(x, crop) if crop else x


# the zoo's U-Nets (src/models/unet.c): name -> (reversible, widths, groups)
ZOO = {
    "unet3d": (False, [16, 32, 64, 128], 8),
    "prunet3d": (True, [16, 32, 64, 128], 8),
    "unet3d_brats": (False, [60, 120, 240, 360, 480], 30),
    "prunet3d_brats": (True, [60, 120, 240, 360, 480], 30),
}


def build_zoo(name, in_channels, num_classes, reversible=False):
    rev, widths, groups = ZOO[name]
    if rev:
        return PartiallyReversibleUNet3d(widths, in_channels, num_classes, "group", groups, reversible=reversible)
    return UNet3d(widths, in_channels, num_classes, "group", groups, "transposed")


def build_from_metadata(m):
    ints = lambda key: [int(v) for v in m[key].split(",")]  # noqa: E731
    widths, cin, k, groups = ints("widths"), int(m["in_channels"]), int(m["num_classes"]), int(m["groups"])
    if m["kind"] == "prunet":
        return PartiallyReversibleUNet3d(widths, cin, k, m["norm"], groups, ints("enc_blocks"), ints("dec_blocks"))
    return UNet3d(widths, cin, k, m["norm"], groups, m["upsample"])


def check(path):
    tensors, meta = safetensors_io.load(path)
    x = torch.from_numpy(np.ascontiguousarray(tensors.pop("input")))
    want = torch.from_numpy(np.ascontiguousarray(tensors.pop("output")))
    net = build_from_metadata(meta)
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
    net.load_state_dict(state, strict=True)
    net.train()
    with torch.no_grad():
        got = net(x)
    if got.shape != want.shape:
        print(f"FAIL {os.path.basename(path)}: PyTorch output {tuple(got.shape)}, revtorch {tuple(want.shape)}")
        return False
    diff = (got - want).abs().max().item()
    scale = want.abs().max().item()
    ok = diff <= 1e-4 * scale + 1e-6
    print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(path)}: {meta['kind']} {meta['widths']} norm {meta['norm']}, "
          f"input {tuple(x.shape)}, {len(state)} tensors loaded strictly, max |PyTorch - revtorch| = {diff:.3g} "
          f"(max |y| {scale:.3g})")
    return ok


def main(argv):
    if len(argv) < 3 or argv[1] != "check":
        print(__doc__.split("Usage")[1] if "Usage" in __doc__ else __doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(2)
    ok = all([check(p) for p in argv[2:]])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""Write PyTorch reference results for the super-resolution ops and EDSR.

Run from anywhere:   /usr/bin/python3 tools/make_superres_fixtures.py
(Debian's python3 with python3-torch 1.13.)

Writes tests/fixtures/superres/<case>.safetensors, replayed by
tests/test_superres.c. Same conventions as tools/make_fixtures.py (whose
helpers this script uses): torch.manual_seed(crc32(case) % 100000), float32,
one thread, byte-identical on re-run; x input, y output, grad_y ~ N(0, 1) of
y's shape, grad_* the gradients of sum(y * grad_y); the op's parameters in
__metadata__ as decimal strings (tuples "h,w").

Cases:
  pixel_shuffle_r2, pixel_shuffle_r3     F.pixel_shuffle   (metadata r)
  pixel_unshuffle_r2                     F.pixel_unshuffle (metadata r)
  bicubic_x2, bicubic_down_half,         F.interpolate(mode="bicubic",
  bicubic_size_odd, bicubic_frac,          align_corners=False); metadata
  bicubic_scale_same_size                  size "h,w" ("0,0": none) and
                                           scale_factor "a,b" ("0,0": none)
  edsr_small                             EDSR (Lim et al. 2017) in the
                                           module tree of EDSR-PyTorch
                                           (src/model/edsr.py): 2 residual
                                           blocks, 8 features, 1 channel,
                                           scale 2, res_scale 0.1, no
                                           MeanShift; x [2,1,12,12]; every
                                           parameter under its state-dict path
                                           and its gradient as grad.<path>
"""

import math
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from make_fixtures import backward_with_grad_y, leaf, meta, np_  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "superres")

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ----------------------------------------------------------------------------- pixel shuffle

def _shuffle(shape, r, inverse=False):
    x = leaf(torch.randn(shape))
    y = F.pixel_unshuffle(x, r) if inverse else F.pixel_shuffle(x, r)
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("pixel_unshuffle" if inverse else "pixel_shuffle", r=r))


@case
def pixel_shuffle_r2():
    return _shuffle((2, 12, 3, 4), 2)


@case
def pixel_shuffle_r3():
    return _shuffle((1, 18, 4, 3), 3)


@case
def pixel_unshuffle_r2():
    return _shuffle((2, 3, 6, 4), 2, inverse=True)


# ----------------------------------------------------------------------------- bicubic

def _bicubic(shape, size=None, scale=None):
    x = leaf(torch.randn(shape))
    y = F.interpolate(x, size=size, scale_factor=scale, mode="bicubic", align_corners=False)
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("upsample_bicubic2d", size=tuple(size) if size else (0, 0),
                 scale_factor=tuple(float(s) for s in scale) if scale else (0.0, 0.0)))


@case
def bicubic_x2():
    return _bicubic((2, 3, 5, 6), scale=(2.0, 2.0))


@case
def bicubic_down_half():
    return _bicubic((1, 2, 12, 10), scale=(0.5, 0.5))


@case
def bicubic_size_odd():
    return _bicubic((2, 2, 7, 5), size=(11, 13))


@case
def bicubic_frac():
    # a non-integer ratio and an axis shrunk by size (in/out scale)
    return _bicubic((1, 2, 6, 9), size=(10, 4))


@case
def bicubic_scale_same_size():
    # width 3 × 1.3 stays 3 wide, yet PyTorch resamples it with 1/1.3 (no copy,
    # unlike its linear modes)
    return _bicubic((1, 2, 4, 3), scale=(2.0, 1.3))


# ----------------------------------------------------------------------------- EDSR

class ResBlock(nn.Module):
    """EDSR-PyTorch's common.ResBlock without batch norm: body = conv, ReLU, conv."""

    def __init__(self, n_feats, res_scale):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(n_feats, n_feats, 3, padding=1), nn.ReLU(True),
                                  nn.Conv2d(n_feats, n_feats, 3, padding=1))
        self.res_scale = res_scale

    def forward(self, x):
        return self.body(x).mul(self.res_scale) + x


class Upsampler(nn.Sequential):
    """EDSR-PyTorch's common.Upsampler (no batch norm, no activation)."""

    def __init__(self, scale, n_feats):
        m = []
        if scale & (scale - 1) == 0:
            for _ in range(int(math.log(scale, 2))):
                m += [nn.Conv2d(n_feats, 4 * n_feats, 3, padding=1), nn.PixelShuffle(2)]
        elif scale == 3:
            m += [nn.Conv2d(n_feats, 9 * n_feats, 3, padding=1), nn.PixelShuffle(3)]
        else:
            raise ValueError(scale)
        super().__init__(*m)


class EDSR(nn.Module):
    """EDSR-PyTorch's model/edsr.py without MeanShift (a 1-channel MRI input)."""

    def __init__(self, channels, n_resblocks, n_feats, res_scale, scale):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(channels, n_feats, 3, padding=1))
        body = [ResBlock(n_feats, res_scale) for _ in range(n_resblocks)]
        body.append(nn.Conv2d(n_feats, n_feats, 3, padding=1))
        self.body = nn.Sequential(*body)
        self.tail = nn.Sequential(Upsampler(scale, n_feats), nn.Conv2d(n_feats, channels, 3, padding=1))

    def forward(self, x):
        x = self.head(x)
        res = self.body(x) + x
        return self.tail(res)


def edsr_param_count(channels, n_resblocks, n_feats, scale):
    return sum(p.numel() for p in EDSR(channels, n_resblocks, n_feats, 0.1, scale).parameters())


@case
def edsr_small():
    net = EDSR(1, 2, 8, 0.1, 2)
    x = leaf(torch.randn(2, 1, 12, 12))
    y = net(x)
    grad_y = backward_with_grad_y(y)
    t = {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}
    for name, p in net.named_parameters():
        t[name] = p
        t["grad." + name] = p.grad
    return t, meta("edsr", in_channels=1, n_resblocks=2, n_feats=8, res_scale=0.1, scale=2,
                   params=sum(p.numel() for p in net.parameters()),
                   baseline_params_x2_rgb=edsr_param_count(3, 16, 64, 2),
                   baseline_params_x3_rgb=edsr_param_count(3, 16, 64, 3),
                   baseline_params_x4_rgb=edsr_param_count(3, 16, 64, 4))


# ----------------------------------------------------------------------------- main

def main():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    os.makedirs(OUT_DIR, exist_ok=True)
    total = 0
    for name, fn in CASES.items():
        seed = zlib.crc32(name.encode()) % 100000
        torch.manual_seed(seed)
        tensors, metadata = fn()
        metadata = {"case": name, **metadata, "seed": str(seed), "generator": "tools/make_superres_fixtures.py",
                    "torch_version": torch.__version__}
        arrays = {k: np_(v) for k, v in tensors.items()}
        for k, a in arrays.items():
            assert a.dtype == np.float32, (name, k, a.dtype)
        path = os.path.join(OUT_DIR, name + ".safetensors")
        safetensors_io.save(path, arrays, metadata)
        total += os.path.getsize(path)
        print(f"{os.path.relpath(path, ROOT):50s} {os.path.getsize(path):7d} B  " + " ".join(arrays))
    print(f"{len(CASES)} cases, {total} bytes in {OUT_DIR}")


if __name__ == "__main__":
    main()

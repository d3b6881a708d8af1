#!/usr/bin/python3
"""Evaluate revtorch weights in PyTorch: proof that a file written by
`revtorch train --save FILE` is a plain torchvision-style state dict.

    /usr/bin/python3 tools/pytorch_eval.py WEIGHTS [--model NAME] [--data DIR]
        [--batch-size N] [--threads N] [--test-subset N]
        [--revtorch PATH] [--tolerance PP] [--loss-tolerance REL]

Builds the ResNet named by --model (default: the "model" entry of the file's
metadata; a file without it needs --model) in plain torch.nn with
torchvision's module names, loads WEIGHTS with load_state_dict(strict=True),
reads the Fashion-MNIST test
set (IDX .gz files) with gzip + numpy, normalises it exactly as revtorch does,
((x / 255) - 0.2860) / 0.3530, and evaluates in eval mode (running BN
statistics, no gradients).  Prints

    pytorch accuracy: XX.XX% loss: Y

with the same definitions as `revtorch eval --weights FILE` (top-1 accuracy;
mean cross-entropy over the test images).  With --revtorch PATH it also runs
`PATH eval --weights WEIGHTS` on the same images, prints its numbers and the
differences, and exits 1 if the accuracies differ by more than --tolerance
percentage points (default 0.05) or the losses by more than --loss-tolerance
(relative, default 1e-3).

It accepts what PyTorch's load_state_dict accepts: a state dict without
`num_batches_tracked` (filled with 0) and F64/F16/BF16 tensors (converted to
float32).  Problems get one line on stderr and a non-zero exit: 2 for the
command line (also a file without model metadata and no --model), 1 for a
file that is not valid safetensors or does not fit the model, weights that
hold NaN or Inf, missing test data, or a mismatch with revtorch.

Needs Debian's python (/usr/bin/python3, which has torch); there is no
torchvision here, so the models below mirror torchvision.models.resnet's
classes (BasicBlock, Bottleneck, ResNet) module for module.  The CIFAR-style
resnet20/32/44/56/110 (He et al. 2016, §4.2) use a 3×3/1 stem without max pool,
three stages of 16/32/64 planes and torchvision's projection shortcut
(`downsample` = 1×1 conv + BN) where the shape changes — the same structure
as revtorch's src/models/resnet.c.  bench/pytorch_bench.py imports build_model
from here.
"""

import argparse
import gzip
import os
import re
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


# --------------------------------------------------------------------------
# Models: torchvision.models.resnet, module for module (torchvision 0.14)
# --------------------------------------------------------------------------

def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """torchvision's ResNet v1.5 bottleneck: the stride sits on the 3×3 conv."""
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision.models.ResNet, plus `cifar_stem` for the CIFAR family
    (3×3/1 conv, no max pool) and a configurable stage count/width."""

    def __init__(self, block, layers, widths, num_classes=10, in_channels=3, cifar_stem=False):
        super().__init__()
        self.inplanes = widths[0]
        if cifar_stem:
            self.conv1 = nn.Conv2d(in_channels, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity() if cifar_stem else nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.num_stages = len(layers)
        for i, (n, w) in enumerate(zip(layers, widths)):
            setattr(self, f"layer{i + 1}", self._make_layer(block, w, n, stride=1 if i == 0 else 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[-1] * block.expansion, num_classes)

        for m in self.modules():  # torchvision's initialisation (zero_init_residual=False)
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for i in range(self.num_stages):
            x = getattr(self, f"layer{i + 1}")(x)
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


# name -> (block, blocks per stage, widths, CIFAR stem); same table as src/models/resnet.c
MODELS = {
    "resnet18": (BasicBlock, [2, 2, 2, 2], [64, 128, 256, 512], False),
    "resnet34": (BasicBlock, [3, 4, 6, 3], [64, 128, 256, 512], False),
    "resnet50": (Bottleneck, [3, 4, 6, 3], [64, 128, 256, 512], False),
    "resnet20": (BasicBlock, [3, 3, 3], [16, 32, 64], True),
    "resnet32": (BasicBlock, [5, 5, 5], [16, 32, 64], True),
    "resnet44": (BasicBlock, [7, 7, 7], [16, 32, 64], True),
    "resnet56": (BasicBlock, [9, 9, 9], [16, 32, 64], True),
    "resnet110": (BasicBlock, [18, 18, 18], [16, 32, 64], True),
    "resnet164": (Bottleneck, [18, 18, 18], [16, 32, 64], True),
}


def build_model(name, in_channels=1, num_classes=10):
    if name.startswith("revnet"):
        from pytorch_revnet import REVNETS, build_revnet
        if name in REVNETS:
            return build_revnet(name, in_channels, num_classes)
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    block, layers, widths, cifar = MODELS[name]
    return ResNet(block, layers, widths, num_classes=num_classes, in_channels=in_channels, cifar_stem=cifar)


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

def read_idx(path):
    """Read an IDX file (optionally gzip-compressed) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic)")
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if raw[2] not in dtypes:
        raise ValueError(f"{path}: unknown IDX element type 0x{raw[2]:02x}")
    ndim = raw[3]
    dims = struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim])
    dt = np.dtype(dtypes[raw[2]])
    count = int(np.prod(dims, dtype=np.int64))
    off = 4 + 4 * ndim
    if len(raw) - off < count * dt.itemsize:
        raise ValueError(f"{path}: truncated ({len(raw) - off} data bytes, need {count * dt.itemsize})")
    return np.frombuffer(raw, dtype=dt, count=count, offset=off).reshape(dims)


def find_file(data_dir, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{data_dir}: no {stem}[.gz]")


def load_test_set(data_dir, subset=None):
    images = read_idx(find_file(data_dir, "t10k-images-idx3-ubyte"))
    labels = read_idx(find_file(data_dir, "t10k-labels-idx1-ubyte"))
    if subset:
        images, labels = images[:subset], labels[:subset]
    # float32 arithmetic in the same order as revtorch's loader LUT: ((float)v / 255 - mean) / std
    x = (images.astype(np.float32) / np.float32(255.0) - np.float32(FASHION_MNIST_MEAN)) / np.float32(FASHION_MNIST_STD)
    return torch.from_numpy(np.ascontiguousarray(x[:, None, :, :])), torch.from_numpy(labels.astype(np.int64))


# --------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------

class EvalError(Exception):
    """A problem reported in one line on stderr; `code` is the exit status
    (1: the file or the data cannot be used, 2: the command line is wrong)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


def known_models():
    names = list(MODELS)
    try:
        from pytorch_revnet import REVNETS
        names += list(REVNETS)
    except ImportError:
        pass
    return names


def _first(names, n=3):
    names = sorted(names)
    more = f", ... ({len(names)} in all)" if len(names) > n else ""
    return ", ".join(f"'{k}'" for k in names[:n]) + more


def conform_state_dict(path, name, tensors, expected):
    """The file's tensors as the state dict load_state_dict(strict=True) gets,
    accepting what PyTorch's own loading accepts: a missing
    `*.num_batches_tracked` (BatchNorm fills 0 for a state dict without version
    metadata) and any dtype copy_() converts (F64/F16/BF16 weights become the
    model's float32, an I32 counter its int64).  Names and shapes must match;
    otherwise raises EvalError with one line that counts and samples the
    differences instead of PyTorch's list of every key."""
    # np.array, not np.ascontiguousarray: that one turns a 0-d counter into shape [1]
    state = {k: torch.from_numpy(np.array(v, order="C")) for k, v in tensors.items()}
    for key, ref in expected.items():
        if key.endswith(".num_batches_tracked") and key not in state:
            state[key] = torch.zeros((), dtype=ref.dtype)
        elif key in state and ref.dim() == 0 and tuple(state[key].shape) == (1,):
            state[key] = state[key].reshape(())  # PyTorch 0.3's 1-d scalars, which load_state_dict takes too
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    reshaped = [k for k in expected if k in state and tuple(state[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected or reshaped:
        parts = []
        if missing:
            parts.append(f"{len(missing)} tensors missing ({_first(missing)})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected ({_first(unexpected)})")
        if reshaped:
            k = reshaped[0]
            parts.append(f"{len(reshaped)} with another shape ('{k}' is {list(state[k].shape)}, "
                         f"{name} has {list(expected[k].shape)})")
        raise EvalError(f"{path} does not fit {name}: {'; '.join(parts)}; "
                        f"was it saved from another model? (--model NAME chooses the architecture)")
    for key, ref in expected.items():
        if state[key].dtype != ref.dtype:
            state[key] = state[key].to(ref.dtype)
    return state


def check_finite(path, state):
    """EvalError naming the tensors that hold NaN or Inf values."""
    bad = []
    for key, t in state.items():
        if t.is_floating_point():
            n = int((~torch.isfinite(t)).sum())
            if n:
                bad.append((key, n, t.numel()))
    if bad:
        key, n, numel = bad[0]
        raise EvalError(f"{path}: {len(bad)} of {len(state)} tensors hold NaN or Inf values "
                        f"(first '{key}': {n} of {numel} values); the weights are unusable "
                        f"(did the training diverge?)")


def load_weights(path, model_name=None):
    """(model, name, metadata) for the weights in `path`, or EvalError."""
    try:
        tensors, meta = safetensors_io.load(path)
    except safetensors_io.SafetensorsError as e:
        raise EvalError(f"not a usable safetensors file: {e}") from None
    except OSError as e:
        raise EvalError(f"{path}: {e.strerror or e}") from None
    name = model_name or meta.get("model")
    if not name:
        raise EvalError(f"{path} has no 'model' entry in its metadata (not written by revtorch?): "
                        f"pass --model NAME (one of {', '.join(known_models())})", code=2)
    if name not in known_models():
        where = "--model" if model_name else f"{path}'s metadata"
        raise EvalError(f"unknown model '{name}' (from {where}); known: {', '.join(known_models())}",
                        code=2 if model_name else 1)
    for key, ndim in (("conv1.weight", 4), ("fc.weight", 2)):
        if key not in tensors or tensors[key].ndim != ndim:
            raise EvalError(f"{path}: no {ndim}-d '{key}': not a state dict of a ResNet or RevNet")
    in_ch = tensors["conv1.weight"].shape[1]
    num_classes = tensors["fc.weight"].shape[0]
    model = build_model(name, in_channels=in_ch, num_classes=num_classes)
    state = conform_state_dict(path, name, tensors, model.state_dict())
    check_finite(path, state)
    model.load_state_dict(state, strict=True)
    return model, name, meta


@torch.no_grad()
def evaluate(model, x, y, batch_size=256):
    model.eval()
    correct, total_loss = 0, 0.0
    for i in range(0, x.shape[0], batch_size):
        logits = model(x[i:i + batch_size])
        t = y[i:i + batch_size]
        total_loss += float(F.cross_entropy(logits, t, reduction="sum").double())
        correct += int((logits.argmax(dim=1) == t).sum())
    n = x.shape[0]
    return total_loss / n, correct / n


def run_revtorch(binary, weights, args):
    cmd = [binary, "eval", "--weights", weights, "--data", args.data]
    if args.model:
        cmd += ["--model", args.model]
    if args.test_subset:
        cmd += ["--test-subset", str(args.test_subset)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"loss ([-+0-9.eEnaif]+) accuracy ([0-9.]+)%", r.stdout)
    if r.returncode != 0 or not m:
        sys.stderr.write(f"pytorch_eval: `{' '.join(cmd)}` failed (exit {r.returncode}):\n{r.stdout}{r.stderr}")
        return None
    return float(m.group(1)), float(m.group(2)) / 100.0


def main(argv=None):
    ap = argparse.ArgumentParser(description="Evaluate revtorch weights with PyTorch on the Fashion-MNIST test set.")
    ap.add_argument("weights", help="safetensors file written by `revtorch train --save`")
    ap.add_argument("--model", help="architecture (default: the file's metadata 'model'; "
                                    "needed for a file without it)")
    ap.add_argument("--data", default=DEFAULT_DATA, help=f"Fashion-MNIST directory (default {DEFAULT_DATA})")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    ap.add_argument("--test-subset", type=int, default=0, help="only the first N test images")
    ap.add_argument("--revtorch", metavar="PATH", help="also run `PATH eval` and compare")
    ap.add_argument("--tolerance", type=float, default=0.05, help="max accuracy difference, percentage points")
    ap.add_argument("--loss-tolerance", type=float, default=1e-3,
                    help="max relative loss difference (default 1e-3)")
    args = ap.parse_args(argv)
    for opt in ("batch_size", "threads", "test_subset"):
        v = getattr(args, opt)
        if v < 0 or (opt == "batch_size" and v == 0):
            ap.error(f"--{opt.replace('_', '-')} must be {'positive' if opt == 'batch_size' else '>= 0'}, got {v}")

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model, name, meta = load_weights(args.weights, args.model)
        try:
            x, y = load_test_set(args.data, args.test_subset or None)
        except (OSError, ValueError) as e:
            raise EvalError(f"cannot read the test set: {e}") from None
    except EvalError as e:
        print(f"pytorch_eval: {e}", file=sys.stderr)
        return e.code
    loss, acc = evaluate(model, x, y, args.batch_size)
    extra = f" (epoch {meta['epoch']})" if "epoch" in meta else ""
    print(f"{name} on {x.shape[0]} test images{extra}")
    print(f"pytorch accuracy: {100.0 * acc:.2f}% loss: {loss:.4f}")
    if not np.isfinite(loss):
        print(f"pytorch_eval: the loss is {loss} although every weight is finite (overflow?)", file=sys.stderr)
        return 1

    if args.revtorch:
        r = run_revtorch(args.revtorch, args.weights, args)
        if r is None:
            return 1
        rloss, racc = r
        print(f"revtorch accuracy: {100.0 * racc:.2f}% loss: {rloss:.4f}")
        dacc = 100.0 * (acc - racc)
        print(f"difference (pytorch - revtorch): accuracy {dacc:+.2f} pp, loss {loss - rloss:+.4f}")
        bad = False
        if abs(dacc) > args.tolerance + 1e-9:
            print(f"MISMATCH: accuracies differ by more than {args.tolerance} percentage points")
            bad = True
        # revtorch prints the loss with 4 decimals: allow that rounding on top of the relative tolerance
        if abs(loss - rloss) > args.loss_tolerance * max(abs(rloss), 1e-12) + 5e-5:
            print(f"MISMATCH: losses differ by more than {args.loss_tolerance:g} relative")
            bad = True
        if bad:
            return 1
        print(f"match (accuracy within {args.tolerance} pp, loss within {args.loss_tolerance:g} relative)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

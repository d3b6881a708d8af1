#!/usr/bin/python3
"""Write PyTorch reference results for revtorch's parity tests.

Run from anywhere:   /usr/bin/python3 tools/make_fixtures.py
(Debian's python3 with python3-torch; the `python3` on PATH may lack torch.)

One safetensors file per case goes to tests/fixtures/<case>.safetensors.  Every
case is deterministic (torch.manual_seed(crc32(case name) % 100000), float32, one thread), so
re-running gives byte-identical files.  Tensor naming, which the C tests rely on:

    x                 input (F32)
    weight, bias      the op's parameters, when it has them (no bias -> no bias tensors)
    y                 output (losses: 0-d scalar)
    grad_y            upstream gradient for backward: standard normal, shape of y
                      (losses: 1.0 with shape [])
    grad_x, grad_weight, grad_bias
                      gradients of sum(y * grad_y) w.r.t. x, weight, bias
    extra tensors     per case, see CASES below and tests/fixtures/README.md

The op's parameters are in __metadata__ as decimal strings ("op", "stride":
"2,1", ...); tuples are comma-separated in PyTorch's (H, W) order.

Inputs are kept away from kinks (relu/leaky_relu at 0, max-pool ties) so that a
rounding-level difference in revtorch cannot flip a branch.
"""

import copy
import os
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures")

KINK_MARGIN = 1e-2  # min |x| for relu / leaky_relu inputs in the single-op cases


# ----------------------------------------------------------------------------- helpers

def fmt(v):
    """A metadata value as a decimal string; tuples/lists become "a,b"."""
    if isinstance(v, (tuple, list)):
        return ",".join(fmt(e) for e in v)
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return np.format_float_positional(np.float64(v), trim="-")
    return str(v)


def pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def np_(t):
    return t.detach().contiguous().cpu().numpy().copy()


def away_from_zero(x, margin=KINK_MARGIN):
    """Push every element of x to at least `margin` from 0, keeping its sign."""
    sign = torch.where(x >= 0, torch.ones_like(x), -torch.ones_like(x))
    return torch.where(x.abs() < margin, x + sign * margin, x)


def distinct(shape, scale=4.0):
    """A tensor of distinct values (a scaled random permutation, centred on 0).

    Neighbouring values differ by scale/numel, far above f32 rounding, so max
    pooling has no ties anywhere."""
    n = int(np.prod(shape))
    perm = torch.randperm(n).to(torch.float32)
    return ((perm / n - 0.5) * scale).reshape(shape)


def leaf(t):
    return t.detach().clone().requires_grad_(True)


def backward_with_grad_y(y):
    """Draw grad_y ~ N(0, 1) of y's shape and back-propagate it."""
    grad_y = torch.randn(y.shape)
    y.backward(grad_y)
    return grad_y


def meta(op, **kw):
    m = {"op": op}
    m.update({k: fmt(v) for k, v in kw.items()})
    return m


# ----------------------------------------------------------------------------- cases

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def case_named(name):
    """As @case, under `name` (for a case named like a Python builtin, e.g. sum)."""
    def register(fn):
        CASES[name] = fn
        return fn
    return register


def _conv(cin, cout, hw, kernel, stride=1, padding=0, dilation=1, groups=1, bias=True, n=2):
    conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding,
                     dilation=dilation, groups=groups, bias=bias)
    x = leaf(torch.randn(n, cin, *hw))
    y = conv(x)
    grad_y = backward_with_grad_y(y)
    t = {"x": x, "weight": conv.weight, "y": y, "grad_y": grad_y,
         "grad_x": x.grad, "grad_weight": conv.weight.grad}
    if bias:
        t["bias"] = conv.bias
        t["grad_bias"] = conv.bias.grad
    m = meta("conv2d", kernel_size=pair(kernel), stride=pair(stride), padding=pair(padding),
             dilation=pair(dilation), groups=groups, bias=bias)
    return t, m


@case
def conv2d_basic():
    return _conv(3, 4, (7, 6), 3, stride=1, padding=1)


@case
def conv2d_stride_pad():
    return _conv(3, 4, (7, 6), 3, stride=2, padding=1, bias=False)


@case
def conv2d_dilation():
    return _conv(3, 4, (7, 6), 3, padding=2, dilation=2)


@case
def conv2d_groups():
    return _conv(4, 6, (7, 6), 3, padding=1, groups=2)


@case
def conv2d_depthwise():
    return _conv(4, 4, (7, 6), 3, padding=1, groups=4)


@case
def conv2d_rect():
    return _conv(3, 4, (7, 6), (1, 3), stride=(2, 1), padding=(0, 1))


def _linear(bias):
    lin = nn.Linear(5, 3, bias=bias)
    x = leaf(torch.randn(4, 5))
    y = lin(x)
    grad_y = backward_with_grad_y(y)
    t = {"x": x, "weight": lin.weight, "y": y, "grad_y": grad_y,
         "grad_x": x.grad, "grad_weight": lin.weight.grad}
    if bias:
        t["bias"] = lin.bias
        t["grad_bias"] = lin.bias.grad
    return t, meta("linear", in_features=5, out_features=3, bias=bias)


@case
def linear():
    return _linear(True)


@case
def linear_nobias():
    return _linear(False)


def _bn_module(c):
    bn = nn.BatchNorm2d(c, eps=1e-5, momentum=0.1)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(c) * 0.5 + 1.0)
        bn.bias.copy_(torch.randn(c) * 0.5)
        bn.running_mean.copy_(torch.randn(c) * 0.5)
        bn.running_var.copy_(torch.rand(c) + 0.5)
    return bn


@case
def batch_norm_train():
    bn = _bn_module(4)
    rm_in, rv_in = bn.running_mean.clone(), bn.running_var.clone()
    x = leaf(torch.randn(3, 4, 5, 5) * 2.0 + 0.5)
    bn.train()
    y = bn(x)
    grad_y = backward_with_grad_y(y)
    t = {"x": x, "weight": bn.weight, "bias": bn.bias,
         "running_mean_in": rm_in, "running_var_in": rv_in,
         "y": y, "grad_y": grad_y, "grad_x": x.grad,
         "grad_weight": bn.weight.grad, "grad_bias": bn.bias.grad,
         "running_mean_out": bn.running_mean, "running_var_out": bn.running_var,
         "num_batches_tracked_out": bn.num_batches_tracked}
    return t, meta("batch_norm", training=True, eps=1e-5, momentum=0.1)


@case
def batch_norm_eval():
    bn = _bn_module(4)
    x = leaf(torch.randn(3, 4, 5, 5) * 2.0 + 0.5)
    bn.eval()
    y = bn(x)
    grad_y = backward_with_grad_y(y)
    t = {"x": x, "weight": bn.weight, "bias": bn.bias,
         "running_mean": bn.running_mean, "running_var": bn.running_var,
         "y": y, "grad_y": grad_y, "grad_x": x.grad,
         "grad_weight": bn.weight.grad, "grad_bias": bn.bias.grad}
    return t, meta("batch_norm", training=False, eps=1e-5, momentum=0.1)


def _eltwise(fn, op, **kw):
    x = leaf(away_from_zero(torch.randn(2, 3, 4, 4)))
    y = fn(x)
    grad_y = backward_with_grad_y(y)
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, meta(op, **kw)


@case
def relu():
    return _eltwise(F.relu, "relu")


@case
def leaky_relu():
    return _eltwise(lambda x: F.leaky_relu(x, 0.2), "leaky_relu", negative_slope=0.2)


def _pointwise(fn, op, x, **kw):
    """y = fn(x) for a smooth op (no kinks to avoid); grad_y ~ N(0, 1) of y's shape."""
    x = leaf(x)
    y = fn(x)
    grad_y = backward_with_grad_y(y)
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, meta(op, **kw)


@case_named("sum")
def sum_all():
    # y and grad_y are 0-d; grad_y is random, so backward's broadcast is checked with a scale
    return _pointwise(torch.sum, "sum", torch.randn(2, 3, 4, 4))


@case
def mean():
    return _pointwise(torch.mean, "mean", torch.randn(2, 3, 4, 4))


@case
def square():
    return _pointwise(torch.square, "square", torch.randn(2, 3, 4, 4))


@case
def pow_scalar():
    # a non-integer exponent needs positive bases (negative ones give NaN): |x| + 0.1
    return _pointwise(lambda x: torch.pow(x, 2.5), "pow", torch.randn(2, 3, 4, 4).abs() + 0.1,
                      exponent=2.5)


@case
def pow_scalar_int():
    # an integer exponent on bases of both signs
    return _pointwise(lambda x: torch.pow(x, 3.0), "pow", torch.randn(2, 3, 4, 4), exponent=3.0)


@case
def tanh():
    return _pointwise(torch.tanh, "tanh", torch.randn(2, 3, 4, 4) * 2.0)


@case
def sigmoid():
    return _pointwise(torch.sigmoid, "sigmoid", torch.randn(2, 3, 4, 4) * 2.0)


def _pool(kind, shape, kernel, stride, padding):
    if kind == "max":
        x = leaf(distinct(shape))
        y = F.max_pool2d(x, kernel, stride, padding)
        m = meta("max_pool2d", kernel_size=pair(kernel), stride=pair(stride),
                 padding=pair(padding), dilation=(1, 1), ceil_mode=False)
    else:
        x = leaf(torch.randn(shape))
        y = F.avg_pool2d(x, kernel, stride, padding, count_include_pad=True)
        m = meta("avg_pool2d", kernel_size=pair(kernel), stride=pair(stride),
                 padding=pair(padding), ceil_mode=False, count_include_pad=True)
    grad_y = backward_with_grad_y(y)
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, m


@case
def max_pool2d_k2s2():
    return _pool("max", (2, 3, 6, 6), 2, 2, 0)


@case
def max_pool2d_k3s2p1():
    return _pool("max", (2, 3, 7, 7), 3, 2, 1)


@case
def avg_pool2d_k2s2():
    return _pool("avg", (2, 3, 6, 6), 2, 2, 0)


@case
def avg_pool2d_k3s2p1():
    return _pool("avg", (2, 3, 7, 7), 3, 2, 1)


@case
def adaptive_avg_pool2d_1x1():
    x = leaf(torch.randn(2, 5, 4, 3))
    y = F.adaptive_avg_pool2d(x, (1, 1))
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("adaptive_avg_pool2d", output_size=(1, 1)))


@case
def add():
    x = leaf(torch.randn(2, 3, 4, 4))
    x2 = leaf(torch.randn(2, 3, 4, 4))
    y = x + x2
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "x2": x2, "y": y, "grad_y": grad_y, "grad_x": x.grad, "grad_x2": x2.grad},
            meta("add"))


@case
def mul_scalar():
    x = leaf(torch.randn(2, 3, 4, 4))
    y = x * 2.5
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("mul_scalar", scale=2.5))


@case
def cat_channels():
    x = leaf(torch.randn(2, 2, 3, 3))
    x2 = leaf(torch.randn(2, 3, 3, 3))
    y = torch.cat([x, x2], dim=1)
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "x2": x2, "y": y, "grad_y": grad_y, "grad_x": x.grad, "grad_x2": x2.grad},
            meta("cat", dim=1))


@case
def split_channels():
    x = leaf(torch.randn(2, 5, 3, 3))
    y0, y1 = torch.split(x, [2, 3], dim=1)
    grad_y0 = torch.randn(y0.shape)
    grad_y1 = torch.randn(y1.shape)
    torch.autograd.backward([y0, y1], [grad_y0, grad_y1])
    return ({"x": x, "y0": y0, "y1": y1, "grad_y0": grad_y0, "grad_y1": grad_y1,
             "grad_x": x.grad},
            meta("split", dim=1, split_sizes=(2, 3)))


@case
def flatten():
    x = leaf(torch.randn(2, 3, 2, 2))
    y = torch.flatten(x, 1)
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("flatten", start_dim=1, end_dim=-1))


def _loss_backward(y):
    grad_y = torch.tensor(1.0)
    y.backward(grad_y)
    return grad_y


def _cross_entropy(smoothing):
    x = leaf(torch.randn(6, 5) * 2.0)
    target = torch.randint(0, 5, (6,), dtype=torch.int64)
    y = F.cross_entropy(x, target, reduction="mean", label_smoothing=smoothing)
    grad_y = _loss_backward(y)
    return ({"x": x, "target": target, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("cross_entropy", reduction="mean", label_smoothing=smoothing))


@case
def cross_entropy():
    return _cross_entropy(0.0)


@case
def cross_entropy_smooth():
    return _cross_entropy(0.1)


@case
def mse_loss():
    x = leaf(torch.randn(3, 4))
    target = torch.randn(3, 4)
    y = F.mse_loss(x, target, reduction="mean")
    grad_y = _loss_backward(y)
    return ({"x": x, "target": target, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("mse_loss", reduction="mean"))


@case
def l1_loss():
    x = leaf(torch.randn(2, 3, 4, 5))
    # the target stays at least 0.1 away from x: no element sits on the kink
    away = (0.1 + torch.randn(2, 3, 4, 5).abs()) * torch.where(torch.rand(2, 3, 4, 5) < 0.5, -1.0, 1.0)
    target = x.detach() + away
    y = F.l1_loss(x, target, reduction="mean")
    grad_y = _loss_backward(y)
    return ({"x": x, "target": target, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("l1_loss", reduction="mean"))


class ConvNet3(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(8)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x, pre_relu=None):
        h1 = self.bn1(self.conv1(x))
        h2 = self.bn2(self.conv2(F.relu(h1)))
        h3 = self.conv3(F.relu(h2))
        if pre_relu is not None:
            pre_relu.extend([h1, h2, h3])
        h = F.adaptive_avg_pool2d(F.relu(h3), (1, 1))
        return self.fc(torch.flatten(h, 1))


@case
def convnet3():
    # Draw models until no relu input lies within 1e-3 of 0 (the loop is itself
    # deterministic, so the fixture stays reproducible).
    for _attempt in range(1000):
        net = ConvNet3()
        with torch.no_grad():
            for bn in (net.bn1, net.bn2):
                c = bn.num_features
                bn.weight.copy_(torch.randn(c) * 0.3 + 1.0)
                bn.bias.copy_(torch.randn(c) * 0.3)
                bn.running_mean.copy_(torch.randn(c) * 0.5)
                bn.running_var.copy_(torch.rand(c) + 0.5)
        x = torch.randn(4, 1, 8, 8)
        target = torch.randint(0, 10, (4,), dtype=torch.int64)
        probe = []
        with torch.no_grad():
            ConvNet3.forward(_clone_module(net), x, probe)
        margin = min(float(h.abs().min()) for h in probe)
        if margin > 1e-3:
            break
    else:
        raise RuntimeError("convnet3: no draw kept relu inputs away from 0")

    state_in = {k: v.detach().clone() for k, v in net.state_dict().items()}
    net.train()
    xl = leaf(x)
    logits = net(xl)
    y = F.cross_entropy(logits, target)
    grad_y = _loss_backward(y)

    t = {"x": xl, "target": target, "logits": logits, "y": y, "grad_y": grad_y,
         "grad_x": xl.grad}
    for name, p in net.named_parameters():
        t[name] = state_in[name]          # parameters: unchanged by the forward
        t["grad." + name] = p.grad
    for name, b in net.named_buffers():
        t[name] = b                       # running stats after the forward
        t[name + "_in"] = state_in[name]  # running stats before it
    m = meta("convnet3", loss="cross_entropy", bn_eps=1e-5, bn_momentum=0.1,
             relu_margin=margin)
    return t, m


def _clone_module(net):
    """A deep copy, so the probe forward does not touch net's running stats."""
    return copy.deepcopy(net)


# ----------------------------------------------------------------------------- 3-D operators
# Volumetric cases (issue 13): written to tests/fixtures/ops3d/ and replayed by
# tests/test_ops3d.c (same tensor naming; metadata tuples in (D, H, W) order).

OUT_DIR_3D = os.path.join(OUT_DIR, "ops3d")
CASES_3D = {}


def case3d(fn):
    CASES_3D[fn.__name__] = fn
    return fn


def triple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v, v)


def _conv3d(cin, cout, dhw, kernel, stride=1, padding=0, dilation=1, groups=1, bias=True, n=2):
    conv = nn.Conv3d(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)
    x = leaf(torch.randn(n, cin, *dhw))
    y = conv(x)
    grad_y = backward_with_grad_y(y)
    t = {"x": x, "weight": conv.weight, "y": y, "grad_y": grad_y, "grad_x": x.grad,
         "grad_weight": conv.weight.grad}
    if bias:
        t["bias"], t["grad_bias"] = conv.bias, conv.bias.grad
    return t, meta("conv3d", stride=triple(stride), padding=triple(padding), dilation=triple(dilation),
                   groups=groups, bias=bias)


@case3d
def conv3d_mixed():
    return _conv3d(4, 6, (5, 6, 5), (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1), groups=2)


@case3d
def conv3d_s2_nobias():
    return _conv3d(3, 4, (7, 6, 5), 3, stride=2, padding=1, bias=False, n=1)


def _conv_transpose3d(cin, cout, dhw, kernel, stride=1, padding=0, output_padding=0, dilation=1, groups=1,
                      bias=True, n=2):
    conv = nn.ConvTranspose3d(cin, cout, kernel, stride=stride, padding=padding, output_padding=output_padding,
                              groups=groups, bias=bias, dilation=dilation)
    x = leaf(torch.randn(n, cin, *dhw))
    y = conv(x)
    grad_y = backward_with_grad_y(y)
    t = {"x": x, "weight": conv.weight, "y": y, "grad_y": grad_y, "grad_x": x.grad,
         "grad_weight": conv.weight.grad}
    if bias:
        t["bias"], t["grad_bias"] = conv.bias, conv.bias.grad
    return t, meta("conv_transpose3d", stride=triple(stride), padding=triple(padding),
                   output_padding=triple(output_padding), dilation=triple(dilation), groups=groups, bias=bias)


@case3d
def conv_transpose3d_k2s2():
    return _conv_transpose3d(4, 3, (3, 3, 2), 2, stride=2)


@case3d
def conv_transpose3d_mixed():
    return _conv_transpose3d(4, 6, (3, 4, 3), 3, stride=(2, 1, 2), padding=(1, 1, 0), output_padding=(1, 0, 1),
                             dilation=(1, 2, 1), groups=2)


def _upsample(shape, size=None, scale=None):
    x = leaf(torch.randn(shape))
    y = F.interpolate(x, size=size, scale_factor=scale, mode="trilinear", align_corners=False)
    grad_y = backward_with_grad_y(y)
    m = meta("upsample_trilinear", size=triple(size) if size else (0, 0, 0),
             scale_factor=",".join(repr(float(v)) for v in triple(scale)) if scale else "0,0,0")
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, m


@case3d
def upsample_trilinear_x2():
    return _upsample((2, 3, 3, 4, 2), scale=2.0)


@case3d
def upsample_trilinear_size():
    return _upsample((1, 2, 4, 3, 5), size=(7, 5, 3))


@case3d
def upsample_trilinear_frac():
    return _upsample((1, 2, 3, 4, 3), scale=(1.7, 2.5, 1.3))


def _pool3d(kind, shape, kernel, stride, padding):
    if kind == "max":
        x = leaf(distinct(shape))
        y = F.max_pool3d(x, kernel, stride, padding)
    else:
        x = leaf(torch.randn(shape))
        y = F.avg_pool3d(x, kernel, stride, padding, count_include_pad=True)
    grad_y = backward_with_grad_y(y)
    m = meta(kind + "_pool3d", kernel_size=triple(kernel), stride=triple(stride), padding=triple(padding))
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, m


@case3d
def max_pool3d_k2s2():
    return _pool3d("max", (2, 3, 4, 6, 4), 2, 2, 0)


@case3d
def max_pool3d_k3s2p1():
    return _pool3d("max", (1, 2, 5, 7, 6), 3, 2, 1)


@case3d
def avg_pool3d_k2s2():
    return _pool3d("avg", (2, 3, 4, 6, 4), 2, 2, 0)


@case3d
def avg_pool3d_k3s2p1():
    return _pool3d("avg", (1, 2, 5, 7, 6), 3, 2, 1)


@case3d
def batch_norm3d_train():
    bn = nn.BatchNorm3d(4)
    with torch.no_grad():
        bn.weight.copy_(torch.randn(4) * 0.5 + 1.0)
        bn.bias.copy_(torch.randn(4) * 0.5)
    rm_in, rv_in = bn.running_mean.clone(), bn.running_var.clone()
    x = leaf(torch.randn(2, 4, 3, 4, 3) * 2.0 + 0.5)
    y = bn(x)
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "weight": bn.weight, "bias": bn.bias, "running_mean_in": rm_in, "running_var_in": rv_in,
             "y": y, "grad_y": grad_y, "grad_x": x.grad, "grad_weight": bn.weight.grad, "grad_bias": bn.bias.grad,
             "running_mean_out": bn.running_mean, "running_var_out": bn.running_var},
            meta("batch_norm3d", eps=1e-5, momentum=0.1))


def _affine(mod, c):
    with torch.no_grad():
        mod.weight.copy_(torch.randn(c) * 0.5 + 1.0)
        mod.bias.copy_(torch.randn(c) * 0.5)


def _norm_case(mod, x, training, affine, op, **kw):
    """Runs a GroupNorm / InstanceNorm3d module; records running stats when it has them."""
    t = {}
    if getattr(mod, "running_mean", None) is not None:
        with torch.no_grad():
            mod.running_mean.copy_(torch.randn(mod.num_features) * 0.5)
            mod.running_var.copy_(torch.rand(mod.num_features) + 0.5)
        t["running_mean_in"], t["running_var_in"] = mod.running_mean.clone(), mod.running_var.clone()
    mod.train(training)
    y = mod(x)
    grad_y = backward_with_grad_y(y)
    t.update({"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad})
    if affine:
        t.update({"weight": mod.weight, "bias": mod.bias, "grad_weight": mod.weight.grad,
                  "grad_bias": mod.bias.grad})
    if "running_mean_in" in t:
        t["running_mean_out"], t["running_var_out"] = mod.running_mean, mod.running_var
    return t, meta(op, training=training, affine=affine, eps=1e-5, momentum=0.1, **kw)


@case3d
def instance_norm3d_affine():
    mod = nn.InstanceNorm3d(4, affine=True)
    _affine(mod, 4)
    return _norm_case(mod, leaf(torch.randn(2, 4, 3, 4, 3) * 2.0 + 0.5), True, True, "instance_norm3d",
                      track_running_stats=False)


@case3d
def instance_norm3d_running_train():
    mod = nn.InstanceNorm3d(3, affine=False, track_running_stats=True)
    return _norm_case(mod, leaf(torch.randn(2, 3, 3, 2, 4) * 1.5 - 0.5), True, False, "instance_norm3d",
                      track_running_stats=True)


@case3d
def instance_norm3d_running_eval():
    mod = nn.InstanceNorm3d(3, affine=True, track_running_stats=True)
    _affine(mod, 3)
    return _norm_case(mod, leaf(torch.randn(2, 3, 3, 2, 4) * 1.5 - 0.5), False, True, "instance_norm3d",
                      track_running_stats=True)


@case3d
def group_norm_affine():
    mod = nn.GroupNorm(2, 6)
    _affine(mod, 6)
    return _norm_case(mod, leaf(torch.randn(2, 6, 3, 3, 4) * 2.0 + 1.0), True, True, "group_norm", num_groups=2)


@case3d
def group_norm_noaffine():
    mod = nn.GroupNorm(3, 3, affine=False)
    return _norm_case(mod, leaf(torch.randn(1, 3, 2, 3, 4)), True, False, "group_norm", num_groups=3)


@case3d
def leaky_relu3d():
    x = leaf(away_from_zero(torch.randn(2, 3, 3, 4, 2)))
    y = F.leaky_relu(x, 0.01)
    grad_y = backward_with_grad_y(y)
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, meta("leaky_relu", negative_slope=0.01)


@case3d
def sigmoid3d():
    x = leaf(torch.randn(2, 3, 3, 4, 2) * 3.0)
    y = torch.sigmoid(x)
    grad_y = backward_with_grad_y(y)
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, meta("sigmoid")


@case3d
def softmax_channels():
    x = leaf(torch.randn(2, 4, 3, 3, 2) * 3.0)
    y = torch.softmax(x, dim=1)
    grad_y = backward_with_grad_y(y)
    return {"x": x, "y": y, "grad_y": grad_y, "grad_x": x.grad}, meta("softmax", dim=1)


@case3d
def cat_channels3d():
    x, x2 = leaf(torch.randn(2, 3, 2, 3, 2)), leaf(torch.randn(2, 2, 2, 3, 2))
    y = torch.cat([x, x2], dim=1)
    grad_y = backward_with_grad_y(y)
    return ({"x": x, "x2": x2, "y": y, "grad_y": grad_y, "grad_x": x.grad, "grad_x2": x2.grad},
            meta("cat", dim=1))


def _ce3d(weighted):
    x = leaf(torch.randn(2, 4, 3, 3, 2) * 2.0)
    target = torch.randint(0, 4, (2, 3, 3, 2), dtype=torch.int64)
    w = torch.rand(4) + 0.25 if weighted else None
    y = F.cross_entropy(x, target, weight=w, reduction="mean")
    grad_y = _loss_backward(y)
    t = {"x": x, "target": target, "y": y, "grad_y": grad_y, "grad_x": x.grad}
    if weighted:
        t["weight"] = w
    return t, meta("cross_entropy", reduction="mean", weighted=weighted)


@case3d
def cross_entropy3d():
    return _ce3d(False)


@case3d
def cross_entropy3d_weighted():
    return _ce3d(True)


def _soft_dice(batch_dice, include_background, smooth=1e-5):
    """nnU-Net's SoftDiceLoss on probabilities, shifted by 1 (ops/ops3d.h)."""
    logits = torch.randn(2, 3, 3, 4, 3) * 2.0
    x = leaf(torch.softmax(logits, dim=1))
    target = torch.randint(0, 3, (2, 3, 4, 3), dtype=torch.int64)
    g = F.one_hot(target, 3).permute(0, 4, 1, 2, 3).to(torch.float32)
    axes = (0, 2, 3, 4) if batch_dice else (2, 3, 4)
    inter, psum, gsum = (x * g).sum(axes), x.sum(axes), g.sum(axes)
    dice = (2 * inter + smooth) / (psum + gsum + smooth)
    if not include_background:
        dice = dice[1:] if batch_dice else dice[:, 1:]
    y = 1 - dice.mean()
    grad_y = _loss_backward(y)
    return ({"x": x, "target": target, "y": y, "grad_y": grad_y, "grad_x": x.grad},
            meta("soft_dice_loss", smooth=smooth, batch_dice=batch_dice, include_background=include_background))


@case3d
def soft_dice_batch_nobg():
    return _soft_dice(True, False)


@case3d
def soft_dice_sample_bg():
    return _soft_dice(False, True)


# ----------------------------------------------------------------------------- main

def main():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    total, count = 0, 0
    for cases, out_dir in ((CASES, OUT_DIR), (CASES_3D, OUT_DIR_3D)):
        os.makedirs(out_dir, exist_ok=True)
        for name, fn in cases.items():
            seed = zlib.crc32(name.encode()) % 100000  # stable when cases are added or reordered
            torch.manual_seed(seed)
            tensors, metadata = fn()
            metadata = {"case": name, **metadata, "seed": str(seed),
                        "generator": "tools/make_fixtures.py",
                        "torch_version": torch.__version__}
            arrays = {k: np_(v) for k, v in tensors.items()}
            for k, a in arrays.items():
                assert a.dtype in (np.float32, np.int64), (name, k, a.dtype)
            path = os.path.join(out_dir, name + ".safetensors")
            safetensors_io.save(path, arrays, metadata)
            size = os.path.getsize(path)
            total += size
            count += 1
            print(f"{os.path.relpath(path, OUT_DIR):40s} {size:7d} B  " + " ".join(arrays))
    print(f"{count} cases, {total} bytes in {OUT_DIR}")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""RevNets in plain PyTorch with revtorch's module names and a reversible
autograd Function (RevNet, Gomez et al. 2017, Algorithm 1), used to load
revtorch's RevNet weights into PyTorch and as the PyTorch side of bench/.

Structure (same as src/models/revnet.c): conv1, bn1, relu; per stage an
optional non-reversible transition block `layerS.0` (BasicBlock/Bottleneck
with downsample) and reversible units `layerS.U` whose F and G
(`layerS.U.f`, `layerS.U.g`) are pre-activation residual functions
(BN-ReLU-conv) on half the channels; then bn_out, relu, global average pool,
fc. With `reversible=True` each stage's reversible units run as one
RevSequence Function that keeps only its output and rebuilds inputs in
backward; with False, plain autograd.
"""
import torch
import torch.nn as nn


class PreAct(nn.Module):
    """(BN-ReLU-conv) × 2 (basic) or × 3 (bottleneck, a quarter of the width inside)."""

    def __init__(self, width, bottleneck):
        super().__init__()
        inner = max(width // 4, 1)
        spec = [(width, inner, 1), (inner, inner, 3), (inner, width, 1)] if bottleneck else \
               [(width, width, 3), (width, width, 3)]
        self.n = len(spec)
        for i, (cin, cout, k) in enumerate(spec):
            setattr(self, f"bn{i + 1}", nn.BatchNorm2d(cin))
            setattr(self, f"conv{i + 1}", nn.Conv2d(cin, cout, k, padding=k // 2, bias=False))

    def forward(self, x):
        for i in range(self.n):
            x = getattr(self, f"conv{i + 1}")(torch.relu(getattr(self, f"bn{i + 1}")(x)))
        return x


class RevUnit(nn.Module):
    """Additive coupling: y1 = x1 + F(x2), y2 = x2 + G(y1); x1 has ⌊C/2⌋ channels."""

    def __init__(self, channels, bottleneck):
        super().__init__()
        self.c1 = channels // 2
        self.f = PreAct(channels - self.c1, bottleneck)
        self.g = PreAct(self.c1, bottleneck)

    def forward(self, x):
        x1, x2 = x[:, :self.c1], x[:, self.c1:]
        y1 = x1 + self.f(x2)
        return torch.cat([y1, x2 + self.g(y1)], 1)


def _accumulate(params, grads):
    for p, g in zip(params, grads):
        if g is not None:
            p.grad = g if p.grad is None else p.grad + g


class RevSequence(torch.autograd.Function):
    """Runs units without a graph, keeps only the output; backward rebuilds
    each unit's input from its output and back-propagates through one
    re-run of F and G. Parameter gradients are accumulated into .grad
    directly (the Function returns None for them)."""

    @staticmethod
    def forward(ctx, x, units, *params):
        ctx.units = units
        with torch.no_grad():
            for u in units:
                x = u(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        for u in reversed(ctx.units):
            y1, y2 = y[:, :u.c1], y[:, u.c1:]
            dy1, dy2 = dy[:, :u.c1], dy[:, u.c1:]
            gparams, fparams = list(u.g.parameters()), list(u.f.parameters())
            with torch.enable_grad():
                y1l = y1.detach().requires_grad_()
                gy = u.g(y1l)
            x2 = (y2 - gy.detach()).requires_grad_()
            with torch.enable_grad():
                fx = u.f(x2)
            x1 = y1 - fx.detach()
            grads = torch.autograd.grad(gy, [y1l] + gparams, dy2)
            _accumulate(gparams, grads[1:])
            dy1t = dy1 + grads[0]
            grads = torch.autograd.grad(fx, [x2] + fparams, dy1t)
            _accumulate(fparams, grads[1:])
            dy = torch.cat([dy1t, dy2 + grads[0]], 1)
            y = torch.cat([x1, x2.detach()], 1)
        return (dy, None) + (None,) * sum(1 for u in ctx.units for _ in u.parameters())


class RevNet(nn.Module):
    def __init__(self, bottleneck, units, stem, widths, in_channels=1, num_classes=10, reversible=True):
        super().__init__()
        from pytorch_eval import BasicBlock, Bottleneck, conv1x1
        block = Bottleneck if bottleneck else BasicBlock
        self.reversible = reversible
        self.conv1 = nn.Conv2d(in_channels, stem, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        ch = stem
        self.stages = []
        for s, (n, w) in enumerate(zip(units, widths)):
            out, stride, u0 = w * block.expansion, (2 if s > 0 else 1), 0
            layer = nn.Module()
            trans = None
            if stride != 1 or ch != out:
                down = nn.Sequential(conv1x1(ch, out, stride), nn.BatchNorm2d(out))
                trans = block(ch, w, stride, down)
                layer.add_module("0", trans)
                u0 = 1
            revs = []
            for u in range(u0, n):
                unit = RevUnit(out, bottleneck)
                layer.add_module(str(u), unit)
                revs.append(unit)
            setattr(self, f"layer{s + 1}", layer)
            self.stages.append((trans, revs))
            ch = out
        self.bn_out = nn.BatchNorm2d(ch)
        self.fc = nn.Linear(ch, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        for trans, revs in self.stages:
            if trans is not None:
                x = trans(x)
            if revs and self.reversible and torch.is_grad_enabled():
                params = [p for u in revs for p in u.parameters()]
                x = RevSequence.apply(x, revs, *params)
            else:
                for u in revs:
                    x = u(x)
        x = torch.relu(self.bn_out(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# name -> (bottleneck, units per stage, stem, widths); same table as src/models/revnet.c
REVNETS = {
    "revnet38": (False, [3, 3, 3], 32, [32, 64, 112]),
    "revnet110": (False, [9, 9, 9], 32, [32, 64, 128]),
    "revnet164": (True, [9, 9, 9], 32, [32, 64, 128]),
    "revnet_small": (False, [3, 3, 3], 16, [16, 32, 64]),
}


def build_revnet(name, in_channels=1, num_classes=10, reversible=True):
    b, units, stem, widths = REVNETS[name]
    return RevNet(b, units, stem, widths, in_channels, num_classes, reversible)

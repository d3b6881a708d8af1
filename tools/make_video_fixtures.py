#!/usr/bin/python3
"""PyTorch reference for revtorch's ConvLSTM predictor (src/models/convlstm.h).

Run from anywhere:   /usr/bin/python3 tools/make_video_fixtures.py
(Debian's python3 with python3-torch.)  Writes tests/fixtures/video/convlstm_seq.safetensors,
read by tests/test_video.c (case convlstm_parity).  Deterministic: seed
crc32("convlstm_seq") % 100000, float32, one thread.

The model, written here with torch's own modules (Shi et al. 2015, eq. 3, no
peepholes; chunk order i, f, g, o as torch.nn.LSTM):
    gates = Conv2d(C + hidden, 4*hidden, k, padding=k//2)(cat[x_t, h])
    i, f, g, o = gates.chunk(4, dim=1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g);  h = sigmoid(o) * tanh(c)
    pred = sigmoid(Conv2d(hidden, C, k, padding=k//2)(h))
Loss: mean over the T steps of F.mse_loss(pred_t, frames[t + 1]), plain BPTT.

Tensors: frames (T+1, N, C, H, W); cell.conv.weight, cell.conv.bias,
head.weight, head.bias (the initial parameters); pred (T, N, C, H, W); state
(N, 2*hidden, H, W) = cat[h_T, c_T]; loss (0-d); grad.<parameter> for each
parameter.
"""

import os
import sys
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "video", "convlstm_seq.safetensors")


class Cell(nn.Module):
    def __init__(self, channels, hidden, k):
        super().__init__()
        self.hidden = hidden
        self.conv = nn.Conv2d(channels + hidden, 4 * hidden, k, padding=k // 2)

    def forward(self, x, h, c):
        i, f, g, o = self.conv(torch.cat([x, h], dim=1)).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c


class Predictor(nn.Module):
    def __init__(self, channels, hidden, k):
        super().__init__()
        self.cell = Cell(channels, hidden, k)
        self.head = nn.Conv2d(hidden, channels, k, padding=k // 2)


def main():
    torch.set_num_threads(1)
    name = "convlstm_seq"
    seed = zlib.crc32(name.encode()) % 100000
    torch.manual_seed(seed)
    channels, hidden, k, steps, n, hgt, wid = 1, 3, 3, 4, 2, 6, 5
    model = Predictor(channels, hidden, k)
    with torch.no_grad():  # larger weights than the default init, so every gate matters
        for p in model.parameters():
            p.mul_(3.0)
    params = {nm: p.detach().clone() for nm, p in model.named_parameters()}
    frames = torch.rand(steps + 1, n, channels, hgt, wid)
    h = torch.zeros(n, hidden, hgt, wid)
    c = torch.zeros(n, hidden, hgt, wid)
    preds, losses = [], []
    for t in range(steps):
        h, c = model.cell(frames[t], h, c)
        pred = torch.sigmoid(model.head(h))
        preds.append(pred)
        losses.append(F.mse_loss(pred, frames[t + 1]))
    loss = torch.stack(losses).mean()
    loss.backward()
    tensors = {"frames": frames, "pred": torch.stack(preds), "state": torch.cat([h, c], dim=1), "loss": loss}
    for nm, p in model.named_parameters():
        tensors[nm] = params[nm]
        tensors["grad." + nm] = p.grad
    arrays = {key: v.detach().contiguous().numpy().copy() for key, v in tensors.items()}
    meta = {"case": name, "channels": str(channels), "hidden": str(hidden), "kernel": str(k), "steps": str(steps),
            "seed": str(seed), "generator": "tools/make_video_fixtures.py", "torch_version": torch.__version__}
    safetensors_io.save(OUT, arrays, meta)
    print(f"{OUT}: " + " ".join(arrays))


if __name__ == "__main__":
    main()

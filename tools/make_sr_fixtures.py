#!/usr/bin/python3
"""Reference values for revtorch's super-resolution data and metrics tests.

Run from anywhere:   /usr/bin/python3 tools/make_sr_fixtures.py
(Debian's python3 with python3-torch, python3-numpy and python3-skimage.)

Writes tests/fixtures/sr_pipeline/sr_metrics.safetensors (deterministic: numpy's
default_rng(16), torch.manual_seed(16)):

    img{i}_x, img{i}_ref   F32 [N, C, H, W] image pairs in [0, 1]
    down_hr, down_lr       F32: down_lr = torch.nn.functional.avg_pool2d(down_hr, 2)

and in __metadata__, for each pair i and border b in BORDERS[i]:

    psnr_{i}_b{b}, ssim_{i}_b{b}   decimal strings (repr of a float64): the mean over the
                                   N*C images of skimage.metrics.peak_signal_noise_ratio and
                                   structural_similarity(gaussian_weights=True, sigma=1.5,
                                   use_sample_covariance=False, data_range=1) on each image with
                                   b pixels cut from every edge, in float64 from the f32 values
"""

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "sr_pipeline",
                   "sr_metrics.safetensors")


def smooth_image(rng, n, c, h, w):
    """Images with structure (sums of random Gaussian blobs), in [0, 1]."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.zeros((n, c, h, w))
    for i in range(n):
        for j in range(c):
            for _ in range(6):
                cy, cx = rng.uniform(0, h), rng.uniform(0, w)
                s = rng.uniform(2.0, 8.0)
                out[i, j] += rng.uniform(0.2, 1.0) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    out /= out.max()
    return out


def main():
    rng = np.random.default_rng(16)
    torch.manual_seed(16)
    tensors, meta = {}, {"case": "sr_metrics", "generator": "tools/make_sr_fixtures.py", "skimage": __import__("skimage").__version__,
                         "torch_version": torch.__version__}
    pairs = []
    # 0: one image, noise of sigma 0.05 (clipped to [0, 1])
    ref = smooth_image(rng, 1, 1, 40, 36)
    x = np.clip(ref + rng.normal(0, 0.05, ref.shape), 0, 1)
    pairs.append((x, ref, (0, 2, 7)))
    # 1: a batch of two images, a blurred and shifted version (structure differs, not just noise)
    ref = smooth_image(rng, 2, 1, 24, 30)
    x = np.roll(ref, 1, axis=3) * 0.9 + 0.05
    pairs.append((x, ref, (0, 2)))
    # 2: two channels, uniform noise on random values (low SSIM)
    ref = rng.uniform(0, 1, (1, 2, 16, 17))
    x = np.clip(ref + rng.uniform(-0.3, 0.3, ref.shape), 0, 1)
    pairs.append((x, ref, (0, 1)))
    for i, (x, ref, borders) in enumerate(pairs):
        x32, r32 = x.astype(np.float32), ref.astype(np.float32)
        tensors[f"img{i}_x"], tensors[f"img{i}_ref"] = x32, r32
        for b in borders:
            ps, ss = [], []
            for n in range(x.shape[0]):
                for c in range(x.shape[1]):
                    a = x32[n, c].astype(np.float64)
                    r = r32[n, c].astype(np.float64)
                    if b:
                        a, r = a[b:-b, b:-b], r[b:-b, b:-b]
                    ps.append(peak_signal_noise_ratio(r, a, data_range=1.0))
                    ss.append(structural_similarity(a, r, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                                    use_sample_covariance=False))
            meta[f"psnr_{i}_b{b}"] = repr(float(np.mean(ps)))
            meta[f"ssim_{i}_b{b}"] = repr(float(np.mean(ss)))
    hr = torch.rand(2, 1, 8, 6)
    tensors["down_hr"] = hr.numpy()
    tensors["down_lr"] = F.avg_pool2d(hr, 2).numpy()
    safetensors_io.save(OUT, tensors, meta)
    for k in sorted(meta):
        print(f"{k:16s} {meta[k]}")


if __name__ == "__main__":
    main()

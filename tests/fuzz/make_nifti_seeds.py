#!/usr/bin/env python3
"""Writes the NIfTI seed corpus of tests/fuzz/fuzz_nifti.c (stdlib only:
struct, gzip). Small valid files covering both versions, both byte orders,
gzip, every supported datatype, scaling, sform/qform and a 5-D vector image.
Run from anywhere: python3 tests/fuzz/make_nifti_seeds.py"""
import gzip
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "nifti")

# datatype code -> (struct letter, bitpix)
TYPES = {2: ("B", 8), 256: ("b", 8), 4: ("h", 16), 512: ("H", 16),
         8: ("i", 32), 16: ("f", 32), 64: ("d", 64)}


def nifti1(dims, dt, values, end="<", slope=0.0, inter=0.0, qform=0, sform=0,
           pixdim=(1.0, 1.0, 1.0)):
    letter, bitpix = TYPES[dt]
    d = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    pd = [1.0] + list(pixdim) + [1.0] * 4
    h = struct.pack(end + "i10s18sihsB", 348, b"", b"", 0, 0, b"r", 0)
    h += struct.pack(end + "8h", *d)
    h += struct.pack(end + "3f", 0, 0, 0)            # intent_p1..3
    h += struct.pack(end + "hhhh", 0, dt, bitpix, 0)  # intent, datatype, bitpix, slice_start
    h += struct.pack(end + "8f", *pd)
    h += struct.pack(end + "3f", 352.0, slope, inter)
    h += struct.pack(end + "hBB", 0, 0, 2)            # slice_end, slice_code, xyzt_units (mm)
    h += struct.pack(end + "ffffii", 0, 0, 0, 0, 0, 0)
    h += b"\0" * 80 + b"\0" * 24
    h += struct.pack(end + "hh", qform, sform)
    h += struct.pack(end + "6f", 0.0, 0.0, 0.0, 1.5, -2.0, 3.0)  # quatern b,c,d, offsets
    h += struct.pack(end + "12f", 2, 0, 0, 10, 0, 3, 0, 20, 0, 0, 4, 30)
    h += b"\0" * 16 + b"n+1\0"
    assert len(h) == 348, len(h)
    return h + b"\0" * 4 + struct.pack(end + "%d%s" % (len(values), letter), *values)


def nifti2(dims, dt, values, end="<", sform=1):
    letter, bitpix = TYPES[dt]
    d = [len(dims)] + list(dims) + [1] * (7 - len(dims))
    h = struct.pack(end + "i8s", 540, b"n+2\0\r\n\x1a\n")
    h += struct.pack(end + "hh", dt, bitpix)
    h += struct.pack(end + "8q", *d)
    h += struct.pack(end + "3d", 0, 0, 0)
    h += struct.pack(end + "8d", 1, 1, 1, 1, 1, 1, 1, 1)
    h += struct.pack(end + "q", 544)
    h += struct.pack(end + "2d", 0.0, 0.0)       # scl_slope, scl_inter
    h += struct.pack(end + "2d", 0.0, 0.0)       # cal_max, cal_min
    h += struct.pack(end + "d2q", 0.0, 0, 0)      # slice_duration, toffset, slice_start
    h += struct.pack(end + "q", 0)               # slice_end
    h += b"\0" * 80 + b"\0" * 24
    h += struct.pack(end + "ii", 0, sform)       # qform_code, sform_code
    h += struct.pack(end + "6d", 0, 0, 0, 0, 0, 0)
    h += struct.pack(end + "12d", -1, 0, 0, 5, 0, 1, 0, 6, 0, 0, 1, 7)
    h += struct.pack(end + "iii", 0, 0, 0)       # slice_code, xyzt_units, intent_code
    h += b"\0" * 16 + b"\0" + b"\0" * 15
    assert len(h) == 540, len(h)
    return h + b"\0" * 4 + struct.pack(end + "%d%s" % (len(values), letter), *values)


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "u8_2x2x2.nii": nifti1((2, 2, 2), 2, range(8)),
        "i8_4.nii": nifti1((4,), 256, [-128, -1, 0, 127]),
        "i16_scaled.nii": nifti1((4, 1, 1), 4, [0, 100, -100, 32767], slope=0.5, inter=10.0),
        "u16_be.nii": nifti1((2, 2, 1), 512, [0, 1, 65535, 300], end=">"),
        "i32_labels_4d.nii": nifti1((2, 1, 2, 1), 8, [0, 3, 7, -2], qform=1),
        "f32_sform.nii": nifti1((3, 1, 1), 16, [0.5, -1.25, 3.0], sform=2, qform=1),
        "f64_5d.nii": nifti1((1, 2, 1, 1, 2), 64, [1.0, 2.0, 3.0, 4.0]),
        "u8_gzip.nii.gz": gzip.compress(nifti1((2, 2, 2), 2, range(8)), mtime=0),
        "nifti2_f32.nii": nifti2((2, 1, 2), 16, [1.0, 2.0, 3.0, 4.0]),
        "nifti2_be_i16.nii": nifti2((3,), 4, [1, -2, 3], end=">"),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, "seed_" + name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()

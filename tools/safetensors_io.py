#!/usr/bin/python3
"""Minimal reader and writer for the safetensors format, using numpy only.

There is no `safetensors` Python package on this machine, so revtorch's tools
(fixture generation, loading revtorch weights into torchvision models) use
this module instead.  It follows the published format exactly, so files it
writes open with the official library and vice versa.

File layout
-----------
    [8 bytes]  N: unsigned 64-bit little-endian length of the header
    [N bytes]  UTF-8 JSON header:
                 {"__metadata__": {"key": "value", ...},        (optional; str -> str)
                  "<name>": {"dtype": "F32",
                             "shape": [d0, d1, ...],           ([] for a 0-d scalar)
                             "data_offsets": [begin, end]},    (relative to the buffer)
                  ...}
               padded on the right with spaces (0x20) so that 8 + N is a multiple of 8
    [rest]     the byte buffer: every tensor's data, C-contiguous, little-endian,
               tensors back to back with no gaps or overlaps, covering the buffer exactly

Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL.
numpy has no bfloat16: BF16 tensors are loaded widened (exactly) to float32,
and save() cannot write BF16 (store float32; revtorch converts on load).

API
---
    tensors, metadata = load(path)       # dict name -> np.ndarray, dict str -> str
    save(path, tensors, metadata=None)   # atomic: writes path + ".tmp", then os.replace

Writing is deterministic: tensors are laid out by element size (largest first,
which keeps every tensor naturally aligned in the buffer) and then by name, and
the header is compact JSON with "__metadata__" first and tensors in buffer
order.  Saving the same dict twice gives byte-identical files.

Run as a script to print a file's header:  /usr/bin/python3 tools/safetensors_io.py FILE...
"""

import json
import os
import struct
import sys

import numpy as np

__all__ = ["load", "save", "read_header", "SafetensorsError"]

# safetensors dtype string <-> little-endian numpy dtype
_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
# numpy kind+itemsize -> safetensors dtype string, for save()
_FROM_NUMPY = {(dt.kind, dt.itemsize): name for name, dt in _DTYPES.items()}

_MAX_HEADER = 100 * 1024 * 1024  # same limit as the reference implementation


class SafetensorsError(ValueError):
    """A file is not valid safetensors, or a tensor cannot be stored."""


def read_header(path):
    """Return (header dict, header length N) without reading tensor data."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path}: file shorter than 8 bytes")
        (n,) = struct.unpack("<Q", head)
        if n > _MAX_HEADER:
            raise SafetensorsError(f"{path}: header length {n} is implausibly large")
        raw = f.read(n)
    if len(raw) != n:
        raise SafetensorsError(f"{path}: header truncated ({len(raw)} of {n} bytes)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    return header, n


def load(path):
    """Read a safetensors file.

    Returns (tensors, metadata): tensors maps each name to a fresh, writable,
    native-byte-order np.ndarray of the stored shape (0-d for shape []);
    metadata is the "__metadata__" dict (empty if absent).  Validates the
    header fully: known dtypes, sizes consistent with shapes, and offsets that
    tile the buffer without gaps or overlaps.
    """
    header, n = read_header(path)
    with open(path, "rb") as f:
        f.seek(8 + n)
        buf = f.read()

    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise SafetensorsError(f"{path}: __metadata__ must map strings to strings")

    tensors = {}
    spans = []
    for name, info in header.items():
        try:
            dtype_name = info["dtype"]
            shape = [int(d) for d in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (TypeError, KeyError, ValueError):
            raise SafetensorsError(f"{path}: tensor '{name}' has a malformed entry") from None
        if dtype_name == "BF16":
            itemsize = 2
        elif dtype_name in _DTYPES:
            itemsize = _DTYPES[dtype_name].itemsize
        else:
            raise SafetensorsError(f"{path}: tensor '{name}' has unsupported dtype {dtype_name}")
        if any(d < 0 for d in shape):
            raise SafetensorsError(f"{path}: tensor '{name}' has a negative dimension")
        count = int(np.prod(shape, dtype=np.int64))  # prod([]) == 1: a scalar
        if not (0 <= begin <= end <= len(buf)) or end - begin != count * itemsize:
            raise SafetensorsError(
                f"{path}: tensor '{name}' offsets [{begin}, {end}] do not match "
                f"{dtype_name} shape {shape} inside a {len(buf)}-byte buffer"
            )
        spans.append((begin, end, name))
        if dtype_name == "BF16":
            bits = np.frombuffer(buf, dtype="<u2", count=count, offset=begin)
            arr = (bits.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=_DTYPES[dtype_name], count=count, offset=begin)
            arr = arr.astype(arr.dtype.newbyteorder("="), copy=True)
        tensors[name] = arr.reshape(shape)

    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            raise SafetensorsError(f"{path}: gap or overlap before tensor '{name}' at byte {begin}")
        pos = end
    if pos != len(buf):
        raise SafetensorsError(f"{path}: {len(buf) - pos} trailing bytes after the last tensor")
    return tensors, dict(metadata)


def save(path, tensors, metadata=None):
    """Write tensors (dict name -> array-like) and metadata (dict str -> str).

    Arrays are converted with np.asarray (so 0-d scalars and nested lists
    work); their dtype must be one of the supported ones (float64/32/16,
    int64/32/16/8, uint8, bool).  The file is written to path + ".tmp" and
    moved into place with os.replace, so readers never see a partial file.
    """
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError(f"metadata must map str to str (got {k!r}: {v!r})")

    items = []
    for name, value in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"invalid tensor name {name!r}")
        arr = np.asarray(value)
        key = (arr.dtype.kind, arr.dtype.itemsize)
        if key not in _FROM_NUMPY:
            raise SafetensorsError(f"tensor '{name}': unsupported numpy dtype {arr.dtype}")
        dtype_name = _FROM_NUMPY[key]
        data = np.ascontiguousarray(arr, dtype=_DTYPES[dtype_name]).tobytes()
        items.append((arr.dtype.itemsize, name, dtype_name, list(arr.shape), data))
    items.sort(key=lambda t: (-t[0], t[1]))  # largest element first: natural alignment

    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for _, name, dtype_name, shape, data in items:
        header[name] = {
            "dtype": dtype_name,
            "shape": shape,
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-(8 + len(raw)) % 8)

    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            for item in items:
                f.write(item[4])
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _main(argv):
    if not argv:
        print(__doc__.strip().splitlines()[0])
        print("usage: safetensors_io.py FILE...", file=sys.stderr)
        return 2
    for path in argv:
        header, n = read_header(path)
        print(f"{path}: header {n} bytes")
        meta = header.pop("__metadata__", None)
        if meta:
            print("  __metadata__: " + ", ".join(f"{k}={v}" for k, v in meta.items()))
        for name, info in header.items():
            print(f"  {name:32s} {info['dtype']:5s} {info['shape']}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

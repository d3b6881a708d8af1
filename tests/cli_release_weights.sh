#!/usr/bin/env bash
# Weight files saved by release 0.1 (before models became module trees) load
# into today's models and evaluate exactly as 0.1 evaluated them
# (tests/fixtures/release-0.1/README.md). Needs Fashion-MNIST: skipped (77)
# when Debian's dataset-fashion-mnist is not installed.
set -euo pipefail
bin="$1"
dir="$(dirname "$0")/fixtures/release-0.1"
[ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ] || { echo "Fashion-MNIST missing: skipped"; exit 77; }
fail=0
check() {
    local model="$1" want="$2" got
    got=$("$bin" eval --weights "$dir/$model.safetensors" --test-subset 1000 --threads 2 | tail -1)
    if [ "$got" = "$want" ]; then
        echo "ok   $got"
    else
        echo "FAIL $model: expected '$want', got '$got'"
        fail=1
    fi
}
check revnet_small "revnet_small on 1000 test images: loss 0.6578 accuracy 75.00%"
check resnet20 "resnet20 on 1000 test images: loss 0.5840 accuracy 76.60%"

# What PyTorch's load_state_dict also accepts loads too: float tensors stored
# as F64 (converted exactly back to f32 here, so the result is identical)
# and a state dict without num_batches_tracked (the counters start at 0).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$dir/resnet20.safetensors" "$tmp/resnet20_f64.safetensors" <<'PY'
import array, json, struct, sys
src, dst = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
body = raw[8 + n:]
out_header, chunks, offset = {}, [], 0
for name, e in header.items():
    if name == "__metadata__":
        out_header[name] = e
        continue
    if name.endswith("num_batches_tracked"):
        continue
    data = body[e["data_offsets"][0]:e["data_offsets"][1]]
    if e["dtype"] == "F32":
        data = array.array("d", array.array("f", data)).tobytes()
        e = dict(e, dtype="F64")
    out_header[name] = dict(e, data_offsets=[offset, offset + len(data)])
    chunks.append(data)
    offset += len(data)
h = json.dumps(out_header).encode()
h += b" " * (-len(h) % 8)
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(chunks))
PY
got=$("$bin" eval --weights "$tmp/resnet20_f64.safetensors" --test-subset 1000 --threads 2 | tail -1)
want="resnet20 on 1000 test images: loss 0.5840 accuracy 76.60%"
if [ "$got" = "$want" ]; then echo "ok   F64 weights without num_batches_tracked: $got"
else echo "FAIL F64 weights without num_batches_tracked: expected '$want', got '$got'"; fail=1; fi
exit $fail

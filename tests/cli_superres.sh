#!/usr/bin/env bash
# `revtorch superres train|eval|memory` end to end on the Colin27 0.5 mm
# brain (Debian's mricron-data; without it the test exits 77): a few steps of
# a tiny EDSR and reversible EDSR, then the outputs — weights, train.csv and
# eval.csv/json that parse, bicubic's PSNR finite and in a sane range, the
# comparison PNG, eval reproducing train's scores from the saved weights —
# the memory prediction, and the refusals (exit 2 usage, 1 runtime).
set -uo pipefail
bin="$1"
img=/usr/share/mricron/templates/ch2better.nii.gz
if [ ! -r "$img" ]; then echo "SKIP: $img missing (apt-get install mricron-data)"; exit 77; fi
pass=0; fail=0
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_lib.sh"
tiny=(--blocks 2 --feats 8 --batch 2 --patch 16 --steps 4 --eval-slices 2 --threads 2)
for model in edsr revedsr; do
    check "train-$model" 0 "PSNR" "$bin" superres train --model "$model" "${tiny[@]}" --out "$tmp/$model"
    for f in weights.safetensors train.csv eval.csv eval.json comparison.png; do
        if [ -s "$tmp/$model/$f" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $model: $f missing"; fi
    done
    py "files-$model" "
import csv, json, math
rows = list(csv.DictReader(open('$tmp/$model/train.csv')))
assert [int(r['step']) for r in rows] == [1, 2, 3, 4], rows
assert all(math.isfinite(float(r['loss'])) and float(r['loss']) > 0 for r in rows)
assert all(0 < float(r['bicubic_loss']) < 0.2 for r in rows), rows
assert all(float(r['step_seconds']) > 0 and float(r['step_cpu_seconds']) > 0 for r in rows)
ev = list(csv.DictReader(open('$tmp/$model/eval.csv')))
assert len(ev) == 3 and ev[-1]['slice'] == 'mean', ev
slices = [int(r['slice']) for r in ev[:-1]]
j = json.load(open('$tmp/$model/eval.json'))
lo, hi = j['heldout_slices']
assert hi == 316 and all(lo <= k < hi for k in slices), (lo, hi, slices)
b = j['bicubic']
# bicubic x2 of a smooth template: far better than noise, not perfect
assert math.isfinite(b['psnr']) and 20 < b['psnr'] < 50 and 0.5 < b['ssim'] <= 1, b
assert abs(float(ev[-1]['bicubic_psnr']) - b['psnr']) < 1e-5
m = j['model_scores']
assert math.isfinite(m['psnr']) and -1 <= m['ssim'] <= 1, m
d = open('$tmp/$model/comparison.png', 'rb').read(24)
assert d[:8] == b'\x89PNG\r\n\x1a\n' and int.from_bytes(d[16:20], 'big') > 1000"
done
# eval from the saved weights (configuration recorded there) gives train's scores
check eval 0 "PSNR" "$bin" superres eval --weights "$tmp/revedsr/weights.safetensors" --eval-slices 2 --threads 2 \
    --out "$tmp/ev"
py eval-same "
import json
a = json.load(open('$tmp/revedsr/eval.json')); b = json.load(open('$tmp/ev/eval.json'))
assert a['model'] == b['model'] == 'revedsr'
assert abs(a['model_scores']['psnr'] - b['model_scores']['psnr']) < 1e-6, (a, b)
assert a['bicubic'] == b['bicubic']"
# a 2F-wide reversible stream: recorded in the weights, rebuilt by eval, and a disagreeing option refused
check train-wide 0 "stream 16, F/G hidden 8" "$bin" superres train --model revedsr "${tiny[@]}" --rev-width 16 \
    --out "$tmp/wide"
check eval-wide 0 "PSNR" "$bin" superres eval --weights "$tmp/wide/weights.safetensors" --eval-slices 2 --threads 2 \
    --out "$tmp/ev-wide"
py eval-wide-same "
import json
a = json.load(open('$tmp/wide/eval.json')); b = json.load(open('$tmp/ev-wide/eval.json'))
assert abs(a['model_scores']['psnr'] - b['model_scores']['psnr']) < 1e-6, (a, b)"
check eval-wide-disagree 2 "\-\-rev-width 24 disagrees with the weights (revedsr, 2 couplings x 8 features, stream 16, F/G hidden 8," \
    "$bin" superres eval --rev-width 24 --weights "$tmp/wide/weights.safetensors" --out "$tmp/dis"
# the options that agree with the weights (the defaults' effective values included) are accepted
check eval-wide-agree 0 "revedsr, 2 couplings x 8 features, stream 16, F/G hidden 8, res_scale 0.1, x2" \
    "$bin" superres eval --rev-width 16 --rev-hidden 8 --weights "$tmp/wide/weights.safetensors" --eval-slices 1 \
    --threads 2 --out "$tmp/agree"
check rev-blocks-train 2 "\-\-rev-blocks sets revedsr's depth in .superres memory. only" "$bin" superres train \
    --model revedsr --rev-blocks 8
check bad-rev-width 2 "\-\-rev-width must be --feats (8) times 1 to 4" "$bin" superres train --model revedsr --feats 8 \
    --rev-width 12
check rev-width-edsr 2 "add --model revedsr" "$bin" superres train --rev-width 128
check memory 0 "largest revedsr batch" "$bin" superres memory --blocks 2 --feats 8 --patch 16 --max-batch 16

# refusals
check no-sub 2 "subcommand" "$bin" superres fly
check bad-model 2 "edsr or revedsr" "$bin" superres train --model unet3d
check bad-scale 2 "scale" "$bin" superres train --scale 5
check bad-option 2 "unknown option" "$bin" superres train --bogus
check bad-holdout 2 "holdout" "$bin" superres train --holdout 1.5
check eval-needs-weights 2 "weights FILE is required" "$bin" superres eval
check missing-image 1 "cannot read --image" "$bin" superres train --image "$tmp/none.nii.gz" --out "$tmp/x"
check huge-patch 2 "slices are" "$bin" superres train --patch 400 --out "$tmp/y"
check not-sr-weights 1 "not a safetensors file" "$bin" superres eval --weights "$tmp/edsr/train.csv" --out "$tmp/z"
# eval takes the model from the weights: a disagreeing option is a usage error
check help-eval-model 0 "shape (--model, --blocks, --feats, --rev-width, --rev-hidden, --scale," "$bin" superres --help
w="$tmp/edsr/weights.safetensors"
check eval-disagree 2 "\-\-model revedsr disagrees with the weights (edsr, 2 blocks x 8 features, res_scale 0.1, x2)" \
    "$bin" superres eval --model revedsr --blocks 3 --feats 16 --scale 3 --weights "$w" --out "$tmp/dis"
check eval-disagree-blocks 2 "\-\-blocks 3 disagrees" "$bin" superres eval --blocks 3 --weights "$w" --out "$tmp/dis"
# damaged weights: metadata out of range, truncated, empty, a directory
python3 - "$w" "$tmp" <<'PY'
import json, struct, sys
src, tmp = sys.argv[1], sys.argv[2]
b = open(src, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
hdr, data = json.loads(b[8:8 + n]), b[8 + n:]
for key, val in (('blocks', '99999999999'), ('scale', '7'), ('gap', '3'), ('rev_width', '12')):
    h = json.loads(json.dumps(hdr)); h['__metadata__'][key] = val
    t = json.dumps(h).encode()
    open(f'{tmp}/meta-{key}.st', 'wb').write(struct.pack('<Q', len(t)) + t + data)
open(f'{tmp}/cut.st', 'wb').write(b[:len(b) - 100])
open(f'{tmp}/empty.st', 'wb').close()
PY
check meta-blocks 1 "weights metadata blocks=99999999999 is out of range \[1, 1024\]: the file is damaged" \
    "$bin" superres eval --weights "$tmp/meta-blocks.st" --out "$tmp/dm"
check meta-scale 1 "weights metadata scale=7 is out of range \[2, 4\]" \
    "$bin" superres eval --weights "$tmp/meta-scale.st" --out "$tmp/dm"
check meta-rev-width 1 "weights metadata rev_width=12 is not feats (8) times 1 to 4" \
    "$bin" superres eval --weights "$tmp/meta-rev_width.st" --out "$tmp/dm"
check weights-truncated 1 "truncated" "$bin" superres eval --weights "$tmp/cut.st" --out "$tmp/dm"
check weights-empty 1 "the file is 0 bytes" "$bin" superres eval --weights "$tmp/empty.st" --out "$tmp/dm"
check weights-dir 1 "not a regular file: Is a directory" "$bin" superres eval --weights "$tmp" --out "$tmp/dm"
# volumes that are not a 3-D intensity image: refused at load, exit 1
python3 - "$tmp" <<'PY'
import random, struct, sys
tmp = sys.argv[1]
def nii(path, dims, fill):
    h = bytearray(352)
    struct.pack_into('<i', h, 0, 348)
    struct.pack_into('<8h', h, 40, len(dims), *(list(dims) + [1] * (7 - len(dims))))
    struct.pack_into('<hh', h, 70, 16, 32)               # float32
    struct.pack_into('<8f', h, 76, 1, 1, 1, 1, 1, 1, 1, 1)
    struct.pack_into('<f', h, 108, 352.0)                # vox_offset
    h[344:348] = b'n+1\0'
    n = 1
    for d in dims: n *= d
    open(path, 'wb').write(bytes(h) + struct.pack(f'<{n}f', *(fill(i) for i in range(n))))
random.seed(0)
nii(f'{tmp}/v4d.nii', (40, 40, 40, 2), lambda i: 1.0)
nii(f'{tmp}/v2d.nii', (64, 64), lambda i: 1.0)
nii(f'{tmp}/zero.nii', (16, 16, 16), lambda i: 0.0)
nii(f'{tmp}/small.nii', (40, 40, 40), lambda i: random.random())
nii(f'{tmp}/low.nii', (40, 40, 40), lambda i: 1.0 if i < 20 * 40 * 40 else 0.0)  # empty top half
PY
# a failed eval leaves no empty --out behind (blocks=3 recorded, 2 blocks' tensors saved)
python3 - "$tmp/meta-gap.st" "$tmp/b3.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n]); h['__metadata__']['blocks'] = '3'; t = json.dumps(h).encode()
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(t)) + t + b[8 + n:])
PY
check eval-fails 1 "cannot load the weights" "$bin" superres eval --weights "$tmp/b3.st" --image "$tmp/small.nii" \
    --out "$tmp/gone/deeper"
if [ ! -e "$tmp/gone" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL eval-fails: empty --out left"; fi
check image-4d 1 "is 4-D (40x40x40x2); give a single 3-D volume" "$bin" superres train --image "$tmp/v4d.nii" --out "$tmp/i"
check image-2d 1 "is 2-D (64x64); superres needs a 3-D volume with >= 3 axial slices" \
    "$bin" superres train --image "$tmp/v2d.nii" --out "$tmp/i"
check image-empty-top 1 "no held-out slice has 10% of its voxels" "$bin" superres train --image "$tmp/low.nii" \
    --patch 4 --out "$tmp/i"
check image-zero 1 "no voxel is > 0" "$bin" superres train --image "$tmp/zero.nii" --patch 4 --out "$tmp/i"
# odd features for the reversible model: found before loading anything
check revedsr-odd-feats 2 "\-\-feats must be even for --model revedsr" \
    "$bin" superres train --model revedsr --feats 7 --image "$tmp/none.nii" --out "$tmp/i"
check memory-odd-feats 2 "\-\-feats must be even" "$bin" superres memory --feats 7
# an unwritable --weights is found before training
check weights-unwritable 1 "cannot write --weights /proc/w.st.*before training" \
    "$bin" superres train "${tiny[@]}" --image "$tmp/small.nii" --weights /proc/w.st --out "$tmp/uw"
check weights-is-dir 1 "cannot write --weights $tmp: Is a directory" \
    "$bin" superres train "${tiny[@]}" --image "$tmp/small.nii" --weights "$tmp" --out "$tmp/uw"
# --out with missing parents is created
check out-parents 0 "PSNR" "$bin" superres eval --weights "$w" --image "$tmp/small.nii" --eval-slices 1 --threads 2 \
    --out "$tmp/a/b/c"
if [ -s "$tmp/a/b/c/eval.json" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL out-parents: no eval.json"; fi
check holdout-zero 2 "must be in (0, 1)" "$bin" superres train --holdout 0
check patch-fix 2 "use --patch <= 13" "$bin" superres train --image "$tmp/small.nii" --patch 24 --scale 3 --out "$tmp/i"
out="$("$bin" superres memory --blocks 2 --feats 8 --patch 16 --max-batch 1 2>&1)"
if grep -q "max-batch reached" <<< "$out" && ! grep -q ") (" <<< "$out"; then pass=$((pass+1));
else fail=$((fail+1)); echo "FAIL memory-max-batch: $out"; fi
# the options of the training comparison
check bad-schedule 2 "constant or cosine" "$bin" superres train --lr-schedule linear
check bad-memory 2 "reversible or standard" "$bin" superres train --memory plain
check bad-conv-algo 2 "auto, direct or winograd" "$bin" superres train --conv-algo fft
# cosine: CosineAnnealingLR with T_max = 3 from 1e-4 gives 1e-4, 7.5e-5, 2.5e-5 (train.csv's lr column)
check train-cosine 0 "cosine-annealed to 0" "$bin" superres train --model revedsr --memory standard "${tiny[@]}" \
    --steps 3 --lr 1e-4 --lr-schedule cosine --out "$tmp/cos"
py "cosine-lr" "
import csv
rows = list(csv.DictReader(open('$tmp/cos/train.csv')))
got = [float(r['lr']) for r in rows]
want = [1e-4, 7.5e-5, 2.5e-5]
assert len(got) == 3 and all(abs(g - w) <= 1e-6 * w for g, w in zip(got, want)), got
"
# standard backpropagation keeps revedsr's activations: more SAVED than the rebuild
sv() { "$bin" superres memory --blocks 2 --feats 8 --patch 16 --batch 4 --max-batch 1 --threads 1 "$@" |
       awk '$1 == "revedsr" {print $4}'; }
rev_saved="$(sv)" std_saved="$(sv --memory standard)"
if [ -n "$rev_saved" ] && awk -v a="$rev_saved" -v b="$std_saved" 'BEGIN {exit !(b > a)}'; then pass=$((pass+1));
else fail=$((fail+1)); echo "FAIL memory-standard: reversible $rev_saved MiB, standard $std_saved MiB"; fi
# memory also reports the largest revedsr batch with direct convolutions (not when they are direct already)
out="$("$bin" superres memory --blocks 2 --feats 8 --patch 16 --max-batch 4 --threads 1 2>&1)"
if grep -q "within it with --conv-algo direct: [0-9]" <<< "$out"; then pass=$((pass+1));
else fail=$((fail+1)); echo "FAIL memory-direct-line: $out"; fi
out="$("$bin" superres memory --blocks 2 --feats 8 --patch 16 --max-batch 4 --threads 1 --conv-algo direct 2>&1)"
if ! grep -q "with --conv-algo direct" <<< "$out" && grep -q "largest revedsr batch" <<< "$out"; then pass=$((pass+1));
else fail=$((fail+1)); echo "FAIL memory-direct-given: $out"; fi
echo "cli_superres: $pass passed, $fail failed"
# every check above counts once: fewer means one was skipped unseen (a TAP plan)
planned=66
[ "$pass" -eq "$planned" ] || echo "cli_superres: $pass checks counted, $planned planned"
[ "$fail" -eq 0 ] && [ "$pass" -eq "$planned" ]

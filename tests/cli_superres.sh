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
check() { # name, expected exit code, grep pattern for stderr+stdout, command...
    local name="$1" want="$2" pat="$3"; shift 3
    local out rc
    out="$("$@" 2>&1)"; rc=$?
    if [ "$rc" -eq "$want" ] && grep -q -- "$pat" <<< "$out"; then pass=$((pass+1));
    else fail=$((fail+1)); echo "FAIL $name: exit $rc (want $want), output: $out" | tail -8; fi
}
py() { # name, python program (exit status decides)
    local name="$1"; shift
    if python3 -c "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $name"; fi
}
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
check not-sr-weights 1 "superres train" "$bin" superres eval --weights "$tmp/edsr/train.csv" --out "$tmp/z"
echo "cli_superres: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

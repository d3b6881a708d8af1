#!/usr/bin/env bash
# `revtorch segment train|predict|eval` end to end on the Colin27 template
# (Debian's mricron-data; without it the test exits 77): a few steps of the
# stand-in network on small patches, then the outputs — weights, a NIfTI
# with the input's shape and geometry, the overlay PNG, dice.csv/json that
# parse, eval reproducing train's Dice from the saved weights — and the
# refusals (exit 2 usage, 1 runtime).
set -uo pipefail
bin="$1"
tpl=/usr/share/mricron/templates
if [ ! -r "$tpl/ch2.nii.gz" ] || [ ! -r "$tpl/ch2bet.nii.gz" ]; then
    echo "SKIP: $tpl/ch2.nii.gz and ch2bet.nii.gz missing (apt-get install mricron-data)"; exit 77; fi
pass=0; fail=0
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_lib.sh"
fast=(--model standin --patch 32,32,32 --batch 2 --epochs 1 --steps 3 --overlap 0 --eval-every 0 --threads 2 --tta off)
check train 0 "held-out mean foreground Dice" "$bin" segment train "${fast[@]}" --save-probabilities --out "$tmp/run"
for f in weights.safetensors prediction.nii.gz overlay.png dice.csv dice.json probabilities.nii.gz; do
    if [ -s "$tmp/run/$f" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL output $f missing"; fi
done
"$bin" inspect --json "$tpl/ch2.nii.gz" > "$tmp/in.json" && "$bin" inspect --json "$tmp/run/prediction.nii.gz" > "$tmp/out.json"
py nifti-geometry "
import json
a = json.load(open('$tmp/in.json')); b = json.load(open('$tmp/out.json'))
assert a['shape'] == b['shape'] == [181, 217, 181], (a['shape'], b['shape'])
assert all(abs(x - y) < 1e-5 for r, s in zip(a['affine'], b['affine']) for x, y in zip(r, s)), (a['affine'], b['affine'])
assert b['min'] == 0 and b['max'] <= 1 and b['integer_valued']"
py dice-files "
import csv, json, math
j = json.load(open('$tmp/run/dice.json'))
assert j['classes'] == 2 and len(j['dice']) == 2 and j['heldout_first_axial_index'] == 127
assert j['overlap'] == 0 and j['tta_mirroring'] is False
assert all(0 <= d <= 1 for d in j['dice']) and abs(j['mean_foreground_dice'] - j['dice'][1]) < 1e-6
rows = list(csv.DictReader(open('$tmp/run/dice.csv')))
assert [r['class'] for r in rows] == ['0', '1'] and abs(float(rows[1]['dice']) - j['dice'][1]) < 1e-6"
# the decision threshold: chosen on the training slab (its Dice there is the best of the sweep, so at least
# the argmax's, which the sweep includes), recorded with the held-out Dice at the argmax when it differs
py threshold "
import json
j = json.load(open('$tmp/run/dice.json'))
assert j['threshold_source'] == 'auto (training slab)', j
assert 0 < j['threshold'] < 1 and j['training_slab_dice'] >= j['training_slab_dice_at_argmax'], j
assert (j['threshold'] == 0.5) == ('dice_at_argmax' not in j), j"
"$bin" inspect --json "$tmp/run/probabilities.nii.gz" > "$tmp/prob.json"
py probabilities "
import json
b = json.load(open('$tmp/prob.json'))
assert b['shape'][:3] == [181, 217, 181] and b['shape'][-1] == 2, b['shape']
assert 0 <= b['min'] and b['max'] <= 1 and b['max'] > 0.5, (b['min'], b['max'])"
py png "
d = open('$tmp/run/overlay.png', 'rb').read(24)
assert d[:8] == b'\x89PNG\r\n\x1a\n' and int.from_bytes(d[16:20], 'big') > 600"
# eval from the saved weights (patch and classes recorded there) gives train's Dice
check eval 0 "mean foreground Dice" "$bin" segment eval --weights "$tmp/run/weights.safetensors" --overlap 0 \
    --tta off --out "$tmp/ev"
py eval-same-dice "
import json
a = json.load(open('$tmp/run/dice.json')); b = json.load(open('$tmp/ev/dice.json'))
assert a['dice'] == b['dice'], (a['dice'], b['dice'])"
# the argmax on request: the Dice train reported at the argmax
check eval-argmax 0 "mean foreground Dice" "$bin" segment eval --weights "$tmp/run/weights.safetensors" --overlap 0 \
    --tta off --threshold 0.5 --out "$tmp/ev5"
py eval-argmax-dice "
import json
a = json.load(open('$tmp/run/dice.json')); b = json.load(open('$tmp/ev5/dice.json'))
assert b['threshold'] == 0.5 and b['threshold_source'] == '--threshold', b
assert abs(b['dice'][1] - a.get('dice_at_argmax', a['dice'][1])) < 1e-6, (a, b)"
check predict 0 "prediction.nii.gz" "$bin" segment predict --weights "$tmp/run/weights.safetensors" --overlap 0 \
    --tta off --out "$tmp/pr"
[ -s "$tmp/pr/prediction.nii.gz" ] && [ ! -e "$tmp/pr/dice.json" ] && pass=$((pass+1)) || { fail=$((fail+1)); echo "FAIL predict outputs"; }
# test-time mirroring (the default): runs the 8 flipped copies and scores
check eval-tta 0 "mean foreground Dice" "$bin" segment eval --weights "$tmp/run/weights.safetensors" --overlap 0 \
    --tta on --out "$tmp/evt"

# refusals
# a U-Net under a memory mode: the plan (its stages, predicted peak and recompute), then the measured step peak
# equal to the prediction
check train-plan 0 "step peak \([0-9.]*\) MiB measured (tracked, above the volumes), \1 MiB predicted" \
    "$bin" segment train --model unet3d --patch 16,16,16 --batch 1 --epochs 1 --steps 2 --overlap 0 --eval-every 0 \
    --threads 2 --tta off --memory-mode balanced --out "$tmp/plan"
# a budget (the hard limit on the step's bytes) with the held-out slab scored after epoch 1: the step fits the
# budget above the volumes and the sampler's voxel lists, and the sliding-window score, whose whole-slab buffers
# no training batch bounds, runs outside the step's limit as the final prediction does
out="$("$bin" segment train --model unet3d --patch 32,32,32 --batch 1 --epochs 2 --steps 1 --overlap 0 --eval-every 1 \
       --threads 2 --tta off --memory-budget 40MiB --out "$tmp/budget" 2>&1)"; rc=$?
peaks="$(sed -n 's/^  step peak \([0-9.]*\) MiB measured.*/\1/p' <<< "$out")"
if [ "$rc" -eq 0 ] && grep -q "^epoch 1: .* held-out Dice [0-9.]*" <<< "$out" && grep -q "held-out mean foreground Dice" <<< "$out" &&
   [ "$(grep -c . <<< "$peaks")" -eq 2 ] && awk '$1 > 40 {over = 1} END {exit over}' <<< "$peaks"; then pass=$((pass+1))
else fail=$((fail+1)); echo "FAIL train-budget-eval: exit $rc, peaks '$peaks': $out" | tail -5; fi
# fp16 trains under the loss scaler as train does (GradScaler: first scale 65536), reported per epoch
check train-fp16-scaler 0 "^  loss scale 65536; 0 steps skipped for Inf/NaN gradients this epoch, 0 in all" \
    "$bin" segment train --model unet3d --patch 16,16,16 --batch 1 --epochs 1 --steps 2 --overlap 0 --eval-every 0 \
    --threads 2 --tta off --precision fp16 --out "$tmp/fp16"
# more segments than the U-Net's 19 listed stages (its units): refused, counting those
check train-too-many-segments 2 "unet3d splits into 19 parts.*give 1 to 19" "$bin" segment train --model unet3d \
    --patch 16,16,16 --batch 1 --epochs 1 --steps 1 --checkpoint-segments 50 --out "$tmp/segs"
check no-sub 2 "usage: revtorch segment" "$bin" segment
check threshold-range 2 "--threshold" "$bin" segment train --threshold 1.5
check threshold-zero 2 "must lie in (0, 1)" "$bin" segment train --threshold 0
check threshold-auto-eval 2 "chosen on the training slab" "$bin" segment eval --weights "$tmp/run/weights.safetensors" \
    --threshold auto
check threshold-multiclass 2 "two-class tasks" "$bin" segment train "${fast[@]}" --labels "$tpl/aal.nii.gz" \
    --threshold 0.6 --out "$tmp/x"
check bad-sub 2 "unknown subcommand" "$bin" segment fit
check bad-tta 2 "--tta: 'maybe'; choose on or off" "$bin" segment train --tta maybe
check transpose-not-cube 2 "needs a cubic patch" "$bin" segment train --patch 32,32,16
check bad-option 2 "unknown option '--nope'" "$bin" segment train --nope
check bad-patch 2 "three integers" "$bin" segment train --patch 32,32
check patch-too-big 2 "larger than the volume" "$bin" segment train --patch 182,64,64 --transpose off --out "$tmp/x"
check classifier-model 2 "image classifier" "$bin" segment train --model resnet20
check holdout 2 "--holdout" "$bin" segment train --holdout 1
check missing-image 1 "cannot read --image" "$bin" segment train --image "$tmp/none.nii.gz" --out "$tmp/x"
check grid-mismatch 1 "in the image's grid" "$bin" segment train --labels "$tpl/JHU-WhiteMatter-labels-2mm.nii.gz" \
    --out "$tmp/x"
check predict-no-weights 2 "--weights FILE is required" "$bin" segment predict
check missing-weights 1 "cannot read --weights" "$bin" segment eval --weights "$tmp/none.safetensors"
check not-segment-weights 1 "revtorch segment train" "$bin" segment predict --weights "$tmp/run/dice.json" --out "$tmp/x"
touch "$tmp/file"
check out-not-dir 1 "not a directory" "$bin" segment train "${fast[@]}" --out "$tmp/file"
echo "cli_segment: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

#!/usr/bin/env bash
# `revtorch video train|eval` end to end on Moving Fashion-MNIST (Debian's
# dataset-fashion-mnist; without it the test exits 77): a few steps plainly
# and under a planned schedule — the same losses and held-out MSE (the
# schedule's gradients are plain BPTT's), the measured chain peak equal to
# the meta-device prediction and lower when planned — the outputs (weights,
# CSVs, PNG), eval reproducing train's MSE from the saved weights, and the
# refusals (exit 2 usage, 1 runtime).
set -uo pipefail
bin="$1"
data="${RT_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
if [ ! -r "$data/train-images-idx3-ubyte.gz" ] && [ ! -r "$data/train-images-idx3-ubyte" ]; then
    echo "SKIP: Fashion-MNIST not in $data (apt-get install dataset-fashion-mnist)"; exit 77; fi
pass=0; fail=0
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/cli_lib.sh"
fast=(--data "$data" --frames 6 --hidden 4 --batch 2 --steps 3 --eval-sequences 3 --threads 1)
check plain 0 "held-out next-frame MSE" "$bin" video train "${fast[@]}" --out "$tmp/plain"
check planned 0 "segments of 1 recorded steps, 2 state slots" "$bin" video train "${fast[@]}" --memory planned \
    --budget 3 --out "$tmp/planned"
check every 0 "segments of 2 recorded steps, 2 state slots" "$bin" video train "${fast[@]}" --memory planned \
    --every 2 --out "$tmp/every"
for f in weights.safetensors train.csv eval.csv strip.png; do
    if [ -s "$tmp/plain/$f" ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL output $f missing"; fi
done
py same-training "
import csv
def rows(p): return list(csv.DictReader(open(p)))
a, b, c = (rows('$tmp/%s/train.csv' % d) for d in ('plain', 'planned', 'every'))
assert len(a) == len(b) == len(c) == 3
for x, y, z in zip(a, b, c):
    assert abs(float(x['loss']) - float(y['loss'])) <= 1e-5 * float(x['loss']), (x, y)
    assert abs(float(x['loss']) - float(z['loss'])) <= 1e-5 * float(x['loss']), (x, z)
e = [rows('$tmp/%s/eval.csv' % d)[0] for d in ('plain', 'planned', 'every')]
for r in e:
    assert r['chain_peak_bytes'] == r['predicted_peak_bytes'], r
    assert abs(float(r['mse']) - float(e[0]['mse'])) <= 1e-5 * float(e[0]['mse']), r
assert int(e[1]['chain_peak_bytes']) < int(e[0]['chain_peak_bytes']) and int(e[1]['chain_peak_bytes']) <= 3 * 2**20
assert e[0]['plain_predicted_peak_bytes'] == e[0]['chain_peak_bytes']"
py png "
d = open('$tmp/plain/strip.png', 'rb').read(24)
assert d[:8] == b'\x89PNG\r\n\x1a\n' and int.from_bytes(d[16:20], 'big') > 600"
check eval 0 "held-out next-frame MSE" "$bin" video eval --data "$data" --weights "$tmp/plain/weights.safetensors" \
    --eval-sequences 3 --threads 1 --out "$tmp/ev"
py eval-same-mse "
import csv
a = next(csv.DictReader(open('$tmp/plain/eval.csv'))); b = next(csv.DictReader(open('$tmp/ev/eval.csv')))
assert a['frames'] == b['frames'] == '6' and a['mse'] == b['mse'], (a, b)"
# refusals
check bad-memory 2 "plain or planned" "$bin" video train --memory lots
check every-plain 2 "memory planned" "$bin" video train --every 2
check eval-no-weights 2 "weights FILE is required" "$bin" video eval
check bad-sub 2 "unknown subcommand" "$bin" video fit
check no-data 1 "Fashion-MNIST" "$bin" video train --data "$tmp/none" --out "$tmp/nd"
check tiny-budget 1 "below the least-memory schedule" "$bin" video train "${fast[@]}" --memory planned --budget 0.01 \
    --out "$tmp/tb"
echo "cli_video: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

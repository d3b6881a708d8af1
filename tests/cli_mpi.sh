#!/usr/bin/env bash
# `mpirun -np 2 revtorch train` (data parallelism, src/dist): one rank
# speaks; a sharded optimizer's checkpoint is byte-identical to the unsharded
# one and resumes with 1 or 2 ranks; options that differ between ranks are
# refused at start-up; a rank killed with kill -9 mid-epoch ends the job with
# a non-zero exit and a message naming it within 60 s, the last checkpoint
# intact; a stopped (hung) rank trips the others' watchdog.
# Exits 77 (skipped) for a build without MPI, without mpirun, or without the data.
set -euo pipefail
bin="$1"
data=${RT_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
command -v mpirun > /dev/null || { echo "no mpirun: skipped"; exit 77; }
ldd "$bin" | grep libmpi > /dev/null || { echo "built without MPI: skipped"; exit 77; }
[ -e "$data/train-images-idx3-ubyte.gz" ] || [ -e "$data/train-images-idx3-ubyte" ] || { echo "no Fashion-MNIST: skipped"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
mpi=(mpirun -np 2 --oversubscribe)
common=(--model resnet20 --data "$data" --train-subset 512 --test-subset 128 --batch-size 64 --seed 3 --warmup-steps 2
        --optimizer adamw --epochs 2)

# one rank speaks; sharded and unsharded checkpoints are the same bytes
"${mpi[@]}" "$bin" train "${common[@]}" --stop-after-epoch 1 --save "$dir/a.safetensors" > "$dir/a.out"
"${mpi[@]}" "$bin" train "${common[@]}" --stop-after-epoch 1 --save "$dir/b.safetensors" --shard-optimizer \
    --bucket-mb 0.1 --log "$dir/b.csv" > "$dir/b.out"
[ "$(grep -c '^epoch 1:' "$dir/b.out")" -eq 1 ] || { echo "FAIL: expected one speaking rank"; cat "$dir/b.out"; exit 1; }
grep -q "data parallel, 2 ranks" "$dir/b.out" || { echo "FAIL: no data-parallel line"; exit 1; }
test -f "$dir/b.png" && test -f "$dir/b.steps.csv"
cmp "$dir/a.optim.safetensors" "$dir/b.optim.safetensors" ||
    { echo "FAIL: the sharded optimizer state saved differs from the unsharded one"; exit 1; }
cmp "$dir/a.safetensors" "$dir/b.safetensors" || { echo "FAIL: sharded weights differ from unsharded"; exit 1; }
echo "2 ranks: sharded AdamW checkpoint byte-identical to the unsharded one"

# resume a 2-rank sharded checkpoint with 1 rank, and with 2 sharded ranks (= 2 unsharded)
cp "$dir/b.safetensors" "$dir/c.safetensors"; cp "$dir/b.optim.safetensors" "$dir/c.optim.safetensors"
"$bin" train "${common[@]}" --resume "$dir/c.safetensors" --threads 1 > "$dir/c.out"
grep -q "^epoch 2:" "$dir/c.out" || { echo "FAIL: 1 rank did not resume the 2-rank checkpoint"; exit 1; }
"${mpi[@]}" "$bin" train "${common[@]}" --resume "$dir/a.safetensors" > /dev/null
"${mpi[@]}" "$bin" train "${common[@]}" --resume "$dir/b.safetensors" --shard-optimizer > /dev/null
cmp "$dir/a.optim.safetensors" "$dir/b.optim.safetensors" && cmp "$dir/a.safetensors" "$dir/b.safetensors" ||
    { echo "FAIL: the sharded resume differs from the unsharded one"; exit 1; }
echo "a 2-rank sharded checkpoint resumes with 1 rank and with 2 (identical to unsharded)"

# options that differ between ranks (MPMD launch) are refused before training
set +e
mpirun -np 1 "$bin" train "${common[@]}" --lr 0.001 : -np 1 "$bin" train "${common[@]}" --lr 0.002 \
    > "$dir/m.out" 2>&1
rc=$?
set -e
[ $rc -ne 0 ] && grep -q "rank 1 differs from rank 0" "$dir/m.out" ||
    { echo "FAIL: mismatched options not refused (exit $rc)"; cat "$dir/m.out"; exit 1; }
echo "mismatched options refused: $(grep -m1 'differ' "$dir/m.out")"

# the pid of rank $1 among this test's revtorch processes
rank_pid() {
    for p in $(pgrep -f "$dir/k.safetensors"); do
        if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo $p; return; fi
    done
}

# kill -9 of rank 1 mid-epoch (signal KILL) and a stopped rank 1 (signal STOP: the watchdog)
for sig in KILL STOP; do
    rm -f "$dir"/k.*
    # 4096 images = 128 steps an epoch: on an idle machine 512 took under a
    # second, so epoch 2 finished (and saved) before the kill landed
    "${mpi[@]}" "$bin" train "${common[@]}" --train-subset 4096 --epochs 4 --batch-size 32 --save "$dir/k.safetensors" \
        --dist-timeout 5 \
        > "$dir/k.out" 2>&1 &
    job=$!
    for _ in $(seq 1 600); do grep -q "saved epoch 1" "$dir/k.out" && break; sleep 0.1; done
    grep -q "saved epoch 1" "$dir/k.out" || { echo "FAIL: no epoch saved"; cat "$dir/k.out"; exit 1; }
    cp "$dir/k.safetensors" "$dir/kept.safetensors"; cp "$dir/k.optim.safetensors" "$dir/kept.optim.safetensors"
    sleep 1 # mid-epoch 2
    pid=$(rank_pid 1)
    [ -n "$pid" ] || { echo "FAIL: rank 1 not found"; exit 1; }
    t0=$(date +%s)
    kill -$sig "$pid"
    set +e
    wait $job
    rc=$?
    set -e
    secs=$(( $(date +%s) - t0 ))
    [ "$sig" = STOP ] && kill -KILL "$pid" 2> /dev/null || true
    [ $rc -ne 0 ] || { echo "FAIL: kill -$sig of rank 1 gave exit 0"; exit 1; }
    [ $secs -le 60 ] || { echo "FAIL: the job took ${secs}s to stop after kill -$sig"; exit 1; }
    grep -Eq "rank 1 .*(exited on signal 9|Killed)|has not completed after" "$dir/k.out" ||
        { echo "FAIL: no message about the lost rank after kill -$sig"; tail -20 "$dir/k.out"; exit 1; }
    cmp "$dir/k.safetensors" "$dir/kept.safetensors" && cmp "$dir/k.optim.safetensors" "$dir/kept.optim.safetensors" ||
        { echo "FAIL: the epoch-1 checkpoint changed"; exit 1; }
    "$bin" eval --weights "$dir/k.safetensors" --data "$data" --test-subset 64 --threads 1 > /dev/null ||
        { echo "FAIL: the checkpoint does not load"; exit 1; }
    echo "kill -$sig of rank 1: exit $rc after ${secs}s, checkpoint intact; $(grep -m1 -E 'exited on signal|has not completed' "$dir/k.out")"
done

# the predicted step peak includes the gradient buckets data parallelism holds
# (a single-process meta run alone missed them: 21.5 predicted, 22.56 measured);
# within 0.5% (a few KiB of per-rank bookkeeping remain unexplained)
"${mpi[@]}" "$bin" train "${common[@]}" --epochs 1 --memory-mode balanced --threads 1 > "$dir/p.out"
line="$(grep 'memory plan: step peak' "$dir/p.out")"
meas="$(sed -n 's/.*step peak \([0-9.]*\) MiB measured.*/\1/p' <<< "$line")"
pred="$(sed -n 's/.*, \([0-9.]*\) MiB predicted.*/\1/p' <<< "$line")"
awk -v m="$meas" -v p="$pred" 'BEGIN {exit !(m > 0 && p > 0 && (m - p) / m <= 0.005 && (p - m) / m <= 0.005)}' ||
    { echo "FAIL: 2 ranks: step peak measured $meas MiB, predicted $pred MiB"; exit 1; }
echo "2 ranks: step peak measured $meas MiB, predicted $pred MiB (gradient buckets included)"

#!/usr/bin/env bash
# Output paths of `revtorch train`: targets that are not regular files,
# symlinks, outputs that collide (also through derived names), two runs on
# the same outputs, a full disk under the log, Ctrl-C, and the lines that say
# where results go. Every run trains a few images for one epoch. Then the
# files of `revtorch memory --memory-timeline` (a meta run, no training):
# checked before any work, and never left half-written.
set -uo pipefail
bin="$1"
pass=0; fail=0
t="$(mktemp -d)"
mounted=""
cleanup() { [ -n "$mounted" ] && umount "$mounted" 2>/dev/null; rm -rf "$t"; }
trap cleanup EXIT
quick=(--model resnet20 --epochs 1 --train-subset 64 --test-subset 64 --batch-size 32 --threads 1)
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL $1"; }
# name, expected exit code, grep pattern for stdout+stderr, command... (60 s at most)
check() {
    local name="$1" want="$2" pat="$3"; shift 3
    local out rc
    out="$(timeout 60 "$@" 2>&1)"; rc=$?
    if [ "$rc" -eq "$want" ] && grep -q -- "$pat" <<< "$out"; then ok
    else bad "$name: exit $rc (want $want, pattern '$pat'), output: $(head -c 600 <<< "$out")"; fi
}
assert() { # name, test expression...
    local name="$1"; shift
    if "$@"; then ok; else bad "$name: [ $* ] is false"; fi
}

# --- targets that are neither absent nor regular files are refused, untouched
if mknod "$t/null" c 1 3 2>/dev/null && mknod "$t/full" c 1 7 2>/dev/null; then
    check devnode-save 1 "is not a regular file" "$bin" train "${quick[@]}" --save "$t/null"
    assert devnode-save-kept test -c "$t/null"
    check devnode-trace 1 "is not a regular file" "$bin" train "${quick[@]}" --memory-trace "$t/full"
    assert devnode-trace-kept test -c "$t/full"
    assert devnode-trace-no-png test ! -e "$t/full.png"
    check devnode-log 1 "is not a regular file" "$bin" train "${quick[@]}" --log "$t/full"
    assert devnode-log-kept test -c "$t/full"
else
    echo "note: mknod not permitted here; device-node cases skipped"
fi
mkfifo "$t/fifo"
check fifo-log 1 "--log $t/fifo.*is not a regular file" "$bin" train "${quick[@]}" --log "$t/fifo"
assert fifo-kept test -p "$t/fifo"
check fifo-save 1 "is not a regular file" "$bin" train "${quick[@]}" --save "$t/fifo"
# a pipe as the log (/proc/self/fd/1 piped to cat) is refused, not read forever
out="$(timeout 60 "$bin" train "${quick[@]}" --log /proc/self/fd/1 2>&1 | cat)"; rc=${PIPESTATUS[0]}
if [ "$rc" -eq 1 ] && grep -q "is not a regular file" <<< "$out"; then ok; else bad "pipe-log: exit $rc: $out"; fi
mkdir "$t/w.optim.safetensors"
check derived-dir 1 "w.optim.safetensors.*is a directory" "$bin" train "${quick[@]}" --save "$t/w.safetensors"
out="$(timeout 60 "$bin" train "${quick[@]}" --save "$t/w.safetensors" 2>&1)"
if grep -q "^epoch 1:" <<< "$out"; then bad "derived-dir-before-work: trained before refusing: $out"; else ok; fi
rmdir "$t/w.optim.safetensors"

# --- symlinks are followed to their target, which is written in place of the link
touch "$t/real.safetensors"
ln -s real.safetensors "$t/link.safetensors"
ln -s missing.csv "$t/dangling.csv"
check symlink-save 0 "saved epoch 1" "$bin" train "${quick[@]}" --save "$t/link.safetensors" --log "$t/dangling.csv"
assert symlink-save-still-link test -L "$t/link.safetensors"
assert symlink-save-target-written test -s "$t/real.safetensors"
assert symlink-log-still-link test -L "$t/dangling.csv"
assert symlink-log-target-written test -s "$t/missing.csv"
check symlink-eval 0 "acc" "$bin" eval --weights "$t/link.safetensors" --test-subset 64 --threads 1
ln -s "$t/null-not-there/x" "$t/into-nowhere.safetensors"
check symlink-to-missing-dir 1 "cannot write --save" "$bin" train "${quick[@]}" --save "$t/into-nowhere.safetensors"

# --- outputs that collide are refused before any work (usage error: 2)
check same-save-log 2 "--save.*--log.*same file" "$bin" train "${quick[@]}" --save "$t/same.csv" --log "$t/same.csv"
assert same-save-log-nothing-written test ! -e "$t/same.csv"
check same-log-trace 2 "--log.*--memory-trace.*same file" "$bin" train "${quick[@]}" --log "$t/tr.csv" --memory-trace "$t/tr.csv"
check derived-steps 2 "tr.steps.csv" "$bin" train "${quick[@]}" --log "$t/tr.csv" --memory-trace "$t/tr.steps.csv"
check derived-optim 2 "w.optim.safetensors" "$bin" train "${quick[@]}" --save "$t/w.safetensors" --log "$t/w.optim.safetensors"
check derived-png 2 "c.png" "$bin" train "${quick[@]}" --log "$t/c.csv" --memory-trace "$t/c.csv.csv" --save "$t/c.png"
ln -s tr.csv "$t/alias.csv"
check collide-through-link 2 "same file" "$bin" train "${quick[@]}" --log "$t/tr.csv" --memory-trace "$t/alias.csv"
check trace-png-name 2 "--memory-trace $t/m.png" "$bin" train "${quick[@]}" --memory-trace "$t/m.png"
assert trace-png-no-double test ! -e "$t/m.png.png" -a ! -e "$t/m.png"

# --- a one-step run traces step 1 and says so
check trace-one-step 0 "memory timeline of step 1:" "$bin" train "${quick[@]}" --train-subset 32 --memory-trace "$t/one.csv"

# --- results: where they go, or that they are not kept; resume keeps saving
check no-save-said 0 "not kept" "$bin" train "${quick[@]}"
check save-said 0 "saved epoch 1 to $t/k.safetensors" "$bin" train "${quick[@]}" --epochs 2 --stop-after-epoch 1 --save "$t/k.safetensors"
check resume-said 0 "resuming $t/k.safetensors at epoch 2" "$bin" train "${quick[@]}" --epochs 2 --resume "$t/k.safetensors"
assert resume-saved-to-resumed grep -qa '"epoch":"2"' "$t/k.safetensors"
assert resume-saved-optim grep -qa '"epoch":"2"' "$t/k.optim.safetensors"

# --- a full disk under the log: the run says so and fails
if mkdir "$t/small" && mount -t tmpfs -o size=64k tmpfs "$t/small" 2>/dev/null; then
    mounted="$t/small"
    dd if=/dev/zero of="$t/small/filler" bs=4k 2>/dev/null
    check full-disk-log 1 "--log $t/small/run.csv" "$bin" train "${quick[@]}" --log "$t/small/run.csv"
else # no mount here: a file-size limit, with SIGXFSZ ignored so the write fails with EFBIG
    out="$( (trap '' XFSZ; ulimit -f 0; timeout 60 "$bin" train "${quick[@]}" --log "$t/run.csv") 2>&1)"; rc=$?
    if [ "$rc" -eq 1 ] && grep -q -- "--log $t/run.csv" <<< "$out"; then ok; else bad "full-disk-log (ulimit): exit $rc: $out"; fi
fi

# the log filling up after the first epoch (a 1 KiB file-size limit; 32 steps an epoch):
# the lost log is reported and the run fails, though training went on
out="$( (trap '' XFSZ; ulimit -f 1; timeout 60 "$bin" train "${quick[@]}" --epochs 2 --batch-size 2 --log "$t/mid.csv") 2>&1)"; rc=$?
if [ "$rc" -eq 1 ] && grep -q -- "cannot write --log $t/mid.csv.*File too large" <<< "$out" && grep -q "^epoch 2:" <<< "$out"
then ok; else bad "log-fills-mid-run: exit $rc: $out"; fi

# a file-size limit without the shell ignoring SIGXFSZ: reported, not a silent kill
out="$( (ulimit -f 1; timeout 60 "$bin" train "${quick[@]}" --log "$t/fsz.csv") 2>&1)"; rc=$?
if [ "$rc" -eq 1 ] && grep -q "File too large" <<< "$out"; then ok; else bad "file-size-limit-reported: exit $rc: $out"; fi
assert file-size-limit-no-leftovers test ! -e "$t/fsz.csv.lock" -a ! -e "$t/fsz.png.tmp"

# output piped into a reader that quits early: the run still finishes its outputs and leaves no locks
( "$bin" train "${quick[@]}" --log "$t/pipe.csv" 2> /dev/null | head -1 > /dev/null )
assert closed-pipe-run-finished test -s "$t/pipe.png"
assert closed-pipe-no-locks test ! -e "$t/pipe.csv.lock" -a ! -e "$t/pipe.steps.csv.lock"

# --- two runs on the same outputs: the second is refused while the first runs;
# --- Ctrl-C ends the first after its step, keeping the saved epoch, and says how to resume
long=(--model resnet20 --epochs 3 --train-subset 1024 --test-subset 64 --batch-size 32 --threads 1)
timeout 120 "$bin" train "${long[@]}" --save "$t/a.safetensors" --log "$t/a.csv" > "$t/a.out" 2>&1 &
pid=$!
for _ in $(seq 1200); do grep -q "saved epoch 1" "$t/a.out" 2>/dev/null && break; sleep 0.1; done
check lock-same-save 1 "in use by another" "$bin" train "${quick[@]}" --save "$t/a.safetensors"
check lock-same-log 1 "in use by another" "$bin" train "${quick[@]}" --log "$t/a.csv"
# files derived from the first run's outputs are in use too
check lock-derived-steps 1 "in use by another" "$bin" train "${quick[@]}" --memory-trace "$t/a.steps.csv"
check lock-derived-optim 1 "in use by another" "$bin" train "${quick[@]}" --log "$t/a.optim.safetensors"
kill -INT "$pid"
wait "$pid"; rc=$?
assert sigint-exit-130 test "$rc" -eq 130
if grep -q "interrupted at epoch 2 step [0-9]*.*resume with: .*revtorch train .*--resume $t/a.safetensors" "$t/a.out"; then ok
else bad "sigint-message: $(tail -5 "$t/a.out")"; fi
assert sigint-lock-removed test ! -e "$t/a.safetensors.lock" -a ! -e "$t/a.csv.lock"
check sigint-weights-intact 0 "accuracy" "$bin" eval --weights "$t/a.safetensors" --test-subset 64 --threads 1
assert sigint-epoch-1-saved grep -qa '"epoch":"1"' "$t/a.optim.safetensors"
check sigint-resume 0 "resuming $t/a.safetensors at epoch 2" "$bin" train "${long[@]}" --stop-after-epoch 2 \
    --save "$t/a.safetensors" --log "$t/a.csv" --resume "$t/a.safetensors"
lines=$(grep -c . "$t/a.csv")
assert sigint-log-rows test "$lines" -eq 3 # header, epoch 1, epoch 2: nothing of the interrupted epoch
steps=$(grep -c . "$t/a.steps.csv")
assert sigint-steps-rows test "$steps" -eq 65 # header + 2 epochs x 32 steps

# --- revtorch memory --memory-timeline F.csv writes F.csv, F.png and F.combined.png:
# --- bad names are usage errors (2) and paths the file system refuses runtime failures (1), both before any
# --- work, and a failed write changes none of them
mem=(memory --model resnet20 --size 8 --channels 3 --batch-size 2 --threads 1)
check memtl-no-dir 1 "cannot write --memory-timeline /nonexistent/dir/t.csv: directory /nonexistent/dir: No such file or directory" \
    "$bin" "${mem[@]}" --memory-timeline /nonexistent/dir/t.csv
out="$("$bin" "${mem[@]}" --memory-timeline /nonexistent/dir/t.csv 2>&1)"
if grep -q "one training step of" <<< "$out"; then bad "memtl-before-work: predicted before refusing: $out"; else ok; fi
check memtl-empty 2 "--memory-timeline needs a file name, got an empty one" "$bin" "${mem[@]}" --memory-timeline ""
mkdir "$t/tldir.csv" "$t/tld.png"
check memtl-dir 1 "--memory-timeline $t/tldir.csv is a directory; give a file name" \
    "$bin" "${mem[@]}" --memory-timeline "$t/tldir.csv"
check memtl-derived-dir 1 "$t/tld.png (written for --memory-timeline $t/tld.csv) is a directory" \
    "$bin" "${mem[@]}" --memory-timeline "$t/tld.csv"
assert memtl-derived-dir-no-csv test ! -e "$t/tld.csv"
# a .png name would get the CSV text, and the picture F.png.png
check memtl-png-name 2 "--memory-timeline $t/tl.png: give the CSV file's name (e.g. $t/tl.csv)" \
    "$bin" "${mem[@]}" --memory-timeline "$t/tl.png"
assert memtl-png-name-nothing-written test ! -e "$t/tl.png" -a ! -e "$t/tl.png.png" -a ! -e "$t/tl.png.combined.png"
# Ctrl-C during --measure (which holds the outputs' locks) ends the run as SIGINT does and leaves no lock
# files (before, they stayed beside the outputs)
timeout 120 "$bin" memory --model resnet20 --size 32 --channels 3 --batch-size 64 --threads 1 --measure \
    --memory-timeline "$t/int.csv" > "$t/int.out" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -e "$t/int.csv.lock" ] && break; sleep 0.1; done
sleep 1 # into the work (its stdout, a file, is block-buffered: nothing to wait for there); it measures for ~10 s
kill -INT "$pid"
wait "$pid"; rc=$?
assert memtl-sigint-130 test "$rc" -eq 130
assert memtl-sigint-no-locks test ! -e "$t/int.csv.lock" -a ! -e "$t/int.png.lock" -a ! -e "$t/int.combined.png.lock"
check memtl-written 0 "memory timeline: $t/tl.csv and $t/tl.png (balanced), $t/tl.combined.png" \
    "$bin" "${mem[@]}" --memory-timeline "$t/tl.csv"
assert memtl-written-files test -s "$t/tl.csv" -a -s "$t/tl.png" -a -s "$t/tl.combined.png"
assert memtl-csv-header test "$(head -1 "$t/tl.csv")" = "time_s,delta_bytes,category,op,module,live_total"
# the CSV (written first) cannot be written: the message says which file and why,
# the three files of the earlier run keep their content, no temporary or lock is left
for f in tl.csv tl.png tl.combined.png; do echo old > "$t/$f"; done
out="$( (trap '' XFSZ; ulimit -f 1; timeout 60 "$bin" "${mem[@]}" --memory-timeline "$t/tl.csv") 2>&1)"; rc=$?
if [ "$rc" -eq 1 ] && grep -q -- "--memory-timeline $t/tl.csv: cannot write $t/tl.csv: File too large; no file of --memory-timeline $t/tl.csv was changed" <<< "$out"
then ok; else bad "memtl-full: exit $rc: $out"; fi
assert memtl-full-kept test "$(cat "$t/tl.csv" "$t/tl.png" "$t/tl.combined.png")" = "$(printf 'old\nold\nold')"
assert memtl-full-no-leftovers test -z "$(find "$t" -maxdepth 1 -name 'tl.*tmp*' -o -maxdepth 1 -name 'tl.*lock')"

echo "cli_outputs: $pass passed, $fail failed"
[ "$fail" -eq 0 ]

# Helpers shared by the CLI tests (tests/cli_*.sh). A script sets pass=0;
# fail=0, then sources this file by its own location, which works from any
# working directory (CTest runs the scripts from the build tree):
#     . "$(dirname "$0")/cli_lib.sh"
# Every helper counts one check in pass or fail and prints FAIL NAME on a
# failure, so a script's summary line and exit status stay its own.

# How much of a failing command's output check prints: the end by default
# (where the error usually is); a script may set check_shows=(head -5) to
# see the start instead.
check_shows=(tail -8)

check() { # name, expected exit code, grep pattern for stderr+stdout, command...
    local name="$1" want="$2" pat="$3"; shift 3
    local out rc
    out="$("$@" 2>&1)"; rc=$?
    if [ "$rc" -eq "$want" ] && grep -q -- "$pat" <<< "$out"; then pass=$((pass+1));
    else fail=$((fail+1)); echo "FAIL $name: exit $rc (want $want), output: $out" | "${check_shows[@]}"; fi
}

py() { # name, python program (exit status decides)
    local name="$1"; shift
    if python3 -c "$@"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL $name"; fi
}

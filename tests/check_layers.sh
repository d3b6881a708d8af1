#!/usr/bin/env bash
# Layer check: a file under src/ may include headers only from its own folder
# or from folders listed ABOVE it in the table of the "## Layers" section of
# docs/design.md (first column: `src/core`, `src/kernels`, ... in order).
#
#   check_layers.sh [ROOT]       checks ROOT/src against ROOT/docs/design.md
#                                (ROOT defaults to the repository holding this
#                                script)
#   check_layers.sh --self-test  proves the check can fail: runs it on small
#                                trees in a temporary directory, one clean and
#                                one with an injected upward include
#
# Only quoted includes are looked at ("folder/name.h"); <system> headers and
# quoted names whose first component is not a folder of src/ are external.
# A quoted name without a folder ("name.h") is the including file's own folder;
# "../folder/name.h" (how the installed public headers include each other,
# see include/revtorch.h) is "folder/name.h".
# Output: one line per offence, "FILE:LINE: ...", naming the include and both
# layers. Exit status: 0 clean, 1 offences found, 2 the table or src/ cannot
# be read.
set -euo pipefail

self_test() {
    local script tmp out status
    script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/rt_check_layers_XXXXXX")"
    trap 'rm -rf "$tmp"' RETURN
    mkdir -p "$tmp/docs" "$tmp/src/low" "$tmp/src/mid" "$tmp/src/high"
    cat > "$tmp/docs/design.md" <<'EOF'
# x

## Layers
One sentence.

| folder | what it holds |
| --- | --- |
| `src/low` | bottom |
| `src/mid` | middle |
| `src/high` | top |
| `cli` | not under src/, ignored |

## Next section
| `src/high` | a table of another section is not the layer table |
EOF
    printf '#include <stdio.h>\n#include "low.h"\n' > "$tmp/src/low/low.h"
    printf '#include "low/low.h"\n#include "mid/other.h"\n#include "zlib.h"\n' > "$tmp/src/mid/mid.c"
    printf '/* nothing */\n' > "$tmp/src/mid/other.h"
    printf '#include "mid/mid.h"\n  #  include "low/low.h"\n' > "$tmp/src/high/high.c"

    if ! out="$(bash "$script" "$tmp" 2>&1)"; then
        echo "self-test: a clean tree was rejected:"
        echo "$out"
        return 1
    fi
    # inject includes of higher layers on line 3 of low/low.h and lines 2-3 of mid/up.c
    printf '/* c */\n#include "low/low.h"\n#include "high/high.h"\n' > "$tmp/src/low/low.c"
    printf '#include "low/low.h"\n# include "high/x.h" /* upward */\n#include "../high/y.h"\n' > "$tmp/src/mid/up.c"
    status=0
    out="$(bash "$script" "$tmp" 2>&1)" || status=$?
    if [ "$status" -ne 1 ]; then
        echo "self-test: exit status $status with three upward includes, expected 1; output:"
        echo "$out"
        return 1
    fi
    local want
    for want in 'src/low/low.c:3: ' '"high/high.h"' 'src/mid/up.c:2: ' '"high/x.h"' 'src/mid/up.c:3: ' '"high/y.h"'; do
        if ! grep -qF -- "$want" <<<"$out"; then
            echo "self-test: the report lacks '$want':"
            echo "$out"
            return 1
        fi
    done
    if [ "$(grep -c . <<<"$out")" -ne 4 ]; then # three offences + the summary line
        echo "self-test: expected exactly three offences:"
        echo "$out"
        return 1
    fi
    # a folder missing from the table is an offence too
    mkdir -p "$tmp/src/stray"
    printf '#include "low/low.h"\n' > "$tmp/src/stray/s.c"
    rm "$tmp/src/low/low.c" "$tmp/src/mid/up.c"
    status=0
    out="$(bash "$script" "$tmp" 2>&1)" || status=$?
    if [ "$status" -ne 1 ] || ! grep -qF 'src/stray/s.c' <<<"$out"; then
        echo "self-test: a folder missing from the layer table was not reported (status $status):"
        echo "$out"
        return 1
    fi
    # no table: status 2
    printf '# nothing here\n' > "$tmp/docs/design.md"
    status=0
    out="$(bash "$script" "$tmp" 2>&1)" || status=$?
    if [ "$status" -ne 2 ]; then
        echo "self-test: a design.md without a layer table gave status $status, expected 2"
        return 1
    fi
    # the real tree and table, copied, with one upward include appended to core/status.h
    local repo lines
    repo="$(cd "$(dirname "$script")/.." && pwd)"
    mkdir -p "$tmp/real/docs"
    cp "$repo/docs/design.md" "$tmp/real/docs/"
    cp -r "$repo/src" "$tmp/real/"
    echo '#include "models/model.h"' >> "$tmp/real/src/core/status.h"
    lines="$(wc -l < "$tmp/real/src/core/status.h")"
    status=0
    out="$(bash "$script" "$tmp/real" 2>&1)" || status=$?
    if [ "$status" -ne 1 ] || ! grep -qF "src/core/status.h:$lines: includes \"models/model.h\"" <<<"$out"; then
        echo "self-test: an include of models/ appended to a copy of src/core/status.h (line $lines) was not reported (status $status):"
        echo "$out"
        return 1
    fi
    echo "self-test passed: clean tree accepted; upward includes (also in a copy of the real src/), unlisted folders and a missing table reported"
}

if [ "${1:-}" = "--self-test" ]; then
    self_test
    exit $?
fi

root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
design="$root/docs/design.md"
if [ ! -r "$design" ] || [ ! -d "$root/src" ]; then
    echo "check_layers: need $design and $root/src" >&2
    exit 2
fi

# The layer table: first-column entries `src/NAME` of the "## Layers" section, in order.
layers="$(awk '
    /^## / { in_sec = ($0 ~ /^## Layers[[:space:]]*$/); next }
    in_sec && /^\|/ {
        split($0, cell, "|")
        f = cell[2]
        gsub(/[`[:space:]]/, "", f)
        if (f ~ /^src\/[A-Za-z0-9_]+$/) print substr(f, 5)
    }' "$design")"
if [ -z "$layers" ]; then
    echo "check_layers: no layer table (rows like | \`src/core\` | ... |) under \"## Layers\" in $design" >&2
    exit 2
fi

cd "$root"
mapfile -t files < <(find src -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
    echo "check_layers: no .c or .h file under $root/src" >&2
    exit 2
fi
# src folders that exist: a quoted include naming one of them is internal.
dirs="$(find src -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort)"

status=0
awk -v layers="$layers" -v dirs="$dirs" '
    BEGIN {
        n = split(layers, l, "\n")
        for (i = 1; i <= n; i++) rank[l[i]] = i
        m = split(dirs, d, "\n")
        for (i = 1; i <= m; i++) isdir[d[i]] = 1
        bad = 0
    }
    FNR == 1 {
        split(FILENAME, part, "/")
        own = part[2]
        if (!(own in rank)) {
            printf "%s:1: folder src/%s is not in the layer table of docs/design.md; add a row for it\n",
                   FILENAME, own
            bad++
        }
    }
    /^[[:space:]]*#[[:space:]]*include[[:space:]]*"/ {
        inc = $0
        sub(/^[^"]*"/, "", inc)
        sub(/".*$/, "", inc)
        sub(/^\.\.\//, "", inc)              # "../core/x.h" (public headers) is src/core/x.h
        slash = index(inc, "/")
        if (slash == 0) next                    # same folder
        dep = substr(inc, 1, slash - 1)
        if (dep == own || !(own in rank)) next
        if (!(dep in rank)) {
            if (dep in isdir) {
                printf "%s:%d: includes \"%s\" from src/%s, a folder missing from the layer table\n",
                       FILENAME, FNR, inc, dep
                bad++
            }
            next                                # not a src folder: external
        }
        if (rank[dep] > rank[own]) {
            printf "%s:%d: includes \"%s\": src/%s (layer %d) may not use src/%s (layer %d, below it in docs/design.md)\n",
                   FILENAME, FNR, inc, own, rank[own], dep, rank[dep]
            bad++
        }
    }
    END {
        if (bad) {
            printf "check_layers: %d include(s) break the layer order of docs/design.md\n", bad
            exit 1
        }
    }' "${files[@]}" || status=$?
if [ "$status" -eq 0 ]; then
    echo "check_layers: ${#files[@]} files under src/ respect the layer order: $(echo $layers | tr ' ' '<')"
fi
exit "$status"

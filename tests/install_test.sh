#!/usr/bin/env bash
# The install test: installs a finished build into a temporary prefix and
# uses it from outside the source tree, as a user would.
#
#   install_test.sh BUILD_DIR
#
# Checks, in order (each failure names what was wrong):
#   1. `cmake --install BUILD_DIR --prefix P` lays out bin/revtorch,
#      include/revtorch.h + include/revtorch/<layer>/<x>.h, the static and
#      the shared library, revtorch.pc and the CMake package;
#   2. the shared library's SONAME is librevtorch.so.<major> (readelf -d),
#      the file librevtorch.so.<major>.<minor>.<patch>;
#   3. it exports exactly the functions the public headers declare
#      (nm -D --defined-only against BUILD_DIR/revtorch_symbols.txt), each
#      under the version node REVTORCH_<major>: no internal symbol leaks;
#   4. revtorch.h compiles alone with only -I P/include, as C11 and C++11,
#      with warnings as errors; every installed header includes only
#      installed headers; every exported function has a comment at its
#      declaration;
#   5. the C example (examples/train_random.c, as installed under
#      P/share/doc/revtorch/examples) builds with
#      `cc $(pkg-config --cflags --libs revtorch)` against the shared
#      library and with `pkg-config --static` against the static one, and
#      both train, print the same losses and save a weight file;
#   6. the C++ example (train_zoo.cpp) builds with c++ and pkg-config, runs;
#   7. a tiny CMake project finds the package with find_package(revtorch
#      0.1) and links revtorch::revtorch (C) and revtorch::revtorch_static
#      (C++); both programs run;
#   8. the installed CLI runs (`revtorch --help`).
set -euo pipefail

if [ $# -ne 1 ] || [ ! -f "$1/CMakeCache.txt" ]; then
    echo "usage: $0 BUILD_DIR (a configured and built CMake build of revtorch)" >&2
    exit 2
fi
build="$(cd "$1" && pwd)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/rt_install_XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

fail() {
    echo "install_test: FAIL: $*" >&2
    exit 1
}
ok() { echo "install_test: ok: $*"; }

# ---------------------------------------------------------------- 1. layout
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || {
    cat "$tmp/install.log"
    fail "cmake --install $build --prefix $prefix"
}
pc="$(find "$prefix" -name revtorch.pc)"
[ -n "$pc" ] || fail "no revtorch.pc installed under $prefix"
export PKG_CONFIG_PATH="$(dirname "$pc")"
libdir="$(cd "$(pkg-config --variable=libdir revtorch)" && pwd)"
includedir="$(cd "$(pkg-config --variable=includedir revtorch)" && pwd)"
for f in "$prefix/bin/revtorch" "$includedir/revtorch.h" "$includedir/revtorch/core/tensor.h" \
    "$libdir/librevtorch.a" "$libdir/librevtorch.so" "$libdir/cmake/revtorch/revtorchConfig.cmake" \
    "$libdir/cmake/revtorch/revtorchConfigVersion.cmake" "$libdir/cmake/revtorch/revtorchTargets.cmake"; do
    [ -e "$f" ] || fail "$f was not installed"
done
n_headers="$(find "$includedir/revtorch" -name '*.h' | wc -l)"
n_public="$(grep -c '^#include "revtorch/' "$includedir/revtorch.h")"
[ "$n_headers" -eq "$n_public" ] ||
    fail "$n_headers headers under $includedir/revtorch, but revtorch.h includes $n_public"
ok "layout under $prefix (libdir $libdir, $n_headers public headers)"

# ---------------------------------------------------------------- 2. SONAME
version="$(pkg-config --modversion revtorch)"
major="${version%%.*}"
real="$(readlink -f "$libdir/librevtorch.so")"
[ "$(basename "$real")" = "librevtorch.so.$version" ] ||
    fail "librevtorch.so points at $(basename "$real"), expected librevtorch.so.$version"
soname="$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[ "$soname" = "librevtorch.so.$major" ] || fail "SONAME is '$soname', expected librevtorch.so.$major"
[ "$(readlink -f "$libdir/$soname")" = "$real" ] || fail "$libdir/$soname is not a link to $(basename "$real")"
ok "readelf -d: SONAME $soname, file $(basename "$real")"

# ---------------------------------------------------------------- 3. exports
nm -D --defined-only "$real" | awk '$1 != "0000000000000000" || $2 != "A" { print $3 }' > "$tmp/exported_raw"
if grep -v "@@REVTORCH_$major\$" "$tmp/exported_raw" > "$tmp/unversioned"; then
    head "$tmp/unversioned"
    fail "the symbols above are exported without the version node REVTORCH_$major"
fi
sed 's/@@.*//' "$tmp/exported_raw" | LC_ALL=C sort > "$tmp/exported"
LC_ALL=C sort "$build/revtorch_symbols.txt" > "$tmp/declared"
if ! diff "$tmp/declared" "$tmp/exported" > "$tmp/exports.diff"; then
    sed -n 's/^> /exported but not declared in a public header: /p; s/^< /declared in a public header but not exported: /p' \
        "$tmp/exports.diff" | head -20
    fail "librevtorch.so exports differ from the public headers' functions"
fi
ok "nm -D --defined-only: $(wc -l < "$tmp/exported") symbols, all rt_* functions of the public headers, version REVTORCH_$major"

# ---------------------------------------------------------------- 4. headers alone
if grep -rn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_0-9]*/' "$includedir/revtorch" | grep -v '"\.\./' > "$tmp/bad_includes"; then
    cat "$tmp/bad_includes"
    fail "installed headers include by a src/-relative path (write \"../layer/x.h\" or \"x.h\")"
fi
printf '#include <revtorch.h>\nint main(void) { return rt_error_last() == 0; }\n' > "$tmp/alone.c"
cc -std=c11 -Wall -Wextra -Wpedantic -Werror -c -I"$includedir" "$tmp/alone.c" -o "$tmp/alone_c.o" ||
    fail "revtorch.h does not compile as C11 with only -I$includedir"
cp "$tmp/alone.c" "$tmp/alone.cpp"
c++ -std=c++11 -Wall -Wextra -Werror -c -I"$includedir" "$tmp/alone.cpp" -o "$tmp/alone_cpp.o" ||
    fail "revtorch.h does not compile as C++11 with only -I$includedir"
nm "$tmp/alone_cpp.o" | grep -q ' U rt_error_last$' || fail "C++ sees rt_error_last with C++ linkage (no extern \"C\")"
ok "revtorch.h compiles alone as C11 and C++11 (extern \"C\" linkage)"
# every exported function is documented where it is declared: its
# declaration (at column 0) follows a comment with no blank line between
# (a group of related declarations may share one comment)
find "$includedir/revtorch" -name '*.h' | LC_ALL=C sort | xargs awk -v list="$tmp/exported" '
    BEGIN { while ((getline n < list) > 0) public[n] = 1 }
    FNR == 1 { documented = 0 }
    /^[[:space:]]*$/ { documented = 0; next }
    /\*\/[[:space:]]*$/ { documented = 1; next }
    /^[A-Za-z_]/ {
        s = $0
        while (match(s, /rt_[A-Za-z0-9_]+[[:space:]]*\(/)) {
            name = substr(s, RSTART, RLENGTH)
            sub(/[[:space:]]*\($/, "", name)
            if ((name in public) && !documented && !(name in seen)) {
                printf "%s:%d: %s has no comment above its declaration\n", FILENAME, FNR, name
                bad = 1
            }
            seen[name] = 1
            s = substr(s, RSTART + RLENGTH)
        }
    }
    END { exit bad }' > "$tmp/undocumented" || {
    cat "$tmp/undocumented"
    fail "public functions without documentation"
}
ok "every exported function has a comment at its declaration"

# ---------------------------------------------------------------- 5. C, pkg-config
work="$tmp/work" # outside the source tree: the examples as installed
examples="$(pkg-config --variable=prefix revtorch)/share/doc/revtorch/examples"
[ -f "$examples/train_random.c" ] || examples="$(find "$prefix" -type d -name examples | head -1)"
mkdir -p "$work"
cp "$examples/train_random.c" "$examples/train_zoo.cpp" "$work/"
cd "$work"
# shellcheck disable=SC2046 # word splitting of pkg-config's flags is intended
cc -std=c11 -Wall -Wextra -Werror train_random.c $(pkg-config --cflags --libs revtorch) -o c_shared ||
    fail "cc train_random.c \$(pkg-config --cflags --libs revtorch)"
readelf -d c_shared | grep -q "NEEDED.*\[librevtorch.so.$major\]" || fail "c_shared does not need librevtorch.so.$major"
ldd_line="$(LD_LIBRARY_PATH="$libdir" ldd c_shared | grep librevtorch)"
[[ "$ldd_line" == *"$libdir/librevtorch.so.$major"* ]] || fail "ldd c_shared: '$ldd_line'"
LD_LIBRARY_PATH="$libdir" ./c_shared w_shared.safetensors > c_shared.out || {
    cat c_shared.out
    fail "the C example linked to the shared library failed"
}
# the static library: the same flags with --static, librevtorch.a named explicitly
static_libs="$(pkg-config --static --libs revtorch)"
static_libs="${static_libs/-lrevtorch/-l:librevtorch.a}"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror train_random.c $(pkg-config --cflags revtorch) $static_libs -o c_static ||
    fail "cc train_random.c with pkg-config --static"
if readelf -d c_static | grep -q 'librevtorch'; then fail "c_static still needs librevtorch.so"; fi
./c_static w_static.safetensors > c_static.out || {
    cat c_static.out
    fail "the C example linked to the static library failed"
}
grep '^step' c_shared.out > losses_shared
grep '^step' c_static.out > losses_static
[ "$(wc -l < losses_shared)" -eq 10 ] || fail "the C example printed $(wc -l < losses_shared) loss lines, expected 10"
cmp -s losses_shared losses_static || {
    paste losses_shared losses_static
    fail "the shared and the static library train differently"
}
awk '{ if ($4 + 0 != $4 + 0 || $4 <= 0) exit 1 }' losses_shared || fail "a loss is not a positive number"
[ -s w_shared.safetensors ] && cmp -s w_shared.safetensors w_static.safetensors ||
    fail "the saved weight files are missing or differ between shared and static"
ok "C example via pkg-config, shared and --static: $(head -1 losses_shared | tr -s ' ') ... $(tail -1 losses_shared | tr -s ' '); weights saved"

# ---------------------------------------------------------------- 6. C++, pkg-config
# shellcheck disable=SC2046
c++ -std=c++17 -Wall -Wextra -Werror train_zoo.cpp $(pkg-config --cflags --libs revtorch) -o cpp_shared ||
    fail "c++ train_zoo.cpp \$(pkg-config --cflags --libs revtorch)"
LD_LIBRARY_PATH="$libdir" ./cpp_shared w_cpp.safetensors > cpp_shared.out || {
    cat cpp_shared.out
    fail "the C++ example failed"
}
[ "$(grep -c '^step' cpp_shared.out)" -eq 3 ] && [ -s w_cpp.safetensors ] || {
    cat cpp_shared.out
    fail "the C++ example did not train 3 steps and save its weights"
}
ok "C++ example via pkg-config: $(head -1 cpp_shared.out)"

# ---------------------------------------------------------------- 7. find_package
mkdir -p cmake_user
cat > cmake_user/CMakeLists.txt <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(revtorch_user LANGUAGES C CXX)
find_package(revtorch 0.1 REQUIRED)
add_executable(user_c ../train_random.c)
target_link_libraries(user_c PRIVATE revtorch::revtorch)
add_executable(user_cpp ../train_zoo.cpp)
set_target_properties(user_cpp PROPERTIES CXX_STANDARD 17)
target_link_libraries(user_cpp PRIVATE revtorch::revtorch_static)
EOF
cmake -S cmake_user -B cmake_user/build -DCMAKE_PREFIX_PATH="$prefix" > cmake_user.log 2>&1 &&
    cmake --build cmake_user/build >> cmake_user.log 2>&1 || {
    cat cmake_user.log
    fail "a CMake project using find_package(revtorch) did not configure or build"
}
grep -q "revtorch_DIR:PATH=$libdir/cmake/revtorch" cmake_user/build/CMakeCache.txt || fail "find_package found another revtorch"
./cmake_user/build/user_c > user_c.out && ./cmake_user/build/user_cpp > user_cpp.out || {
    cat user_c.out user_cpp.out
    fail "the programs built with find_package(revtorch) failed"
}
grep '^step' user_c.out | cmp -s - losses_shared || fail "the find_package C program trains differently"
ok "find_package(revtorch 0.1): revtorch::revtorch (C) and revtorch::revtorch_static (C++) build and run"

# ---------------------------------------------------------------- 8. CLI
"$prefix/bin/revtorch" --help > cli.out 2>&1 || {
    cat cli.out
    fail "the installed revtorch --help"
}
ok "installed CLI: $prefix/bin/revtorch --help"
echo "install_test: all passed"

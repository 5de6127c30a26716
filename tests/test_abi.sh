#!/usr/bin/env bash
# test_abi.sh — the shared library's boundary (docs/design.md §12, "ABI rule"):
#  * it exports exactly the functions the public headers declare (BM_API), nothing internal;
#  * its public ABI equals the recorded one (abi/libbigmac.abi, abidw of the release) unless the
#    soname changed: a public struct's layout or a removed function needs a BM_SOVERSION bump and
#    `make abi-baseline` in the same change (abidiff from Debian's abigail-tools);
#  * the check itself catches a struct that gains a field (on a two-line library built here).
. "$(dirname "$0")/lib.sh"
T=$TEST_TMP
LIB=${TEST_BUILD:-build}/libbigmac.so
[ -e "$LIB" ] || { echo "FAIL abi_library_built: $LIB missing (make shared)"; exit 0; }

# declared: every function declaration in include/*.h (comments removed)
declared() {
    cat include/*.h | tr '\n' ' ' | sed 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/| |g' | tr ';' '\n' |
        grep -o '\bbm_[a-z0-9_]*\s*(' | sed 's/\s*(//' | sort -u
}
declared >"$T/declared"
nm -D --defined-only "$LIB" | awk '$2 == "T" || $2 == "W" || $2 == "D" || $2 == "B" {print $3}' | sort -u >"$T/exported"
nd=$(wc -l <"$T/declared"); ne=$(wc -l <"$T/exported")
if [ "$nd" -gt 50 ] && cmp -s "$T/declared" "$T/exported"; then echo "PASS abi_exports_exactly_the_public_functions"
else echo "FAIL abi_exports_exactly_the_public_functions: $ne exported, $nd declared"
    comm -3 "$T/declared" "$T/exported" | head -20 | sed 's/^\t/    exported, not declared: /; s/^\([^ ]\)/    declared, not exported: \1/'; fi
nbm=$(grep -c '^BM_API' include/*.h | awk -F: '{n += $2} END {print n}')
if [ "$nbm" = "$nd" ]; then echo "PASS abi_every_public_function_carries_BM_API"; else
    echo "FAIL abi_every_public_function_carries_BM_API: $nbm BM_API lines, $nd functions declared"; fi

if ! command -v abidiff >/dev/null || ! command -v abidw >/dev/null; then
    if [ -n "${CI:-}" ]; then echo "FAIL abi_tools: abigail-tools not installed (make deps installs it)"
    else echo "SKIP abi_tools: abigail-tools not installed (make deps installs it)"; fi
    exit 0
fi

# abi_check BASELINE LIB HEADERS: 0 when LIB's soname and public ABI equal the baseline's
abi_check() {
    local base=$1 lib=$2 hdr=$3 bso lso
    bso=$(sed -n "s/.*<abi-corpus [^>]*soname='\([^']*\)'.*/\1/p" "$base" | head -1)
    lso=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    if [ "$bso" != "$lso" ]; then
        echo "the library's soname is $lso, the recorded ABI's $bso: run \`make abi-baseline\` with a soname bump"
        return 1
    fi
    abidiff --no-added-syms --headers-dir2 "$hdr" "$base" "$lib" >"$T/abidiff.out" 2>&1 && return 0
    echo "public ABI changed under soname $lso (bump BM_SOVERSION in include/bigmac.h, then \`make abi-baseline\`):"
    sed 's/^/    /' "$T/abidiff.out" | head -30
    return 1
}

if [ ! -f abi/libbigmac.abi ]; then echo "FAIL abi_baseline_recorded: abi/libbigmac.abi missing (make abi-baseline)"
elif out=$(abi_check abi/libbigmac.abi "$LIB" include); then echo "PASS abi_matches_recorded_baseline"
else echo "FAIL abi_matches_recorded_baseline: $out"; fi

# the check's own sensitivity: a public struct that gains a field under the same soname fails it,
# the same change with a soname bump and a new baseline passes, and an added function passes
mkdir -p "$T/abi/inc"
mklib() {  # mklib DIR SONAME EXTRA_FIELD EXTRA_FUNCTION
    mkdir -p "$1"
    printf 'struct thing { int a; double b;%s };\nint thing_get(const struct thing *t);\n%s\n' "$3" "$4" >"$T/abi/inc/thing.h"
    local more=""
    [ -n "$4" ] && more='int thing_more(void) { return 1; }'
    printf '#include "thing.h"\nint thing_get(const struct thing *t) { return t->a; }\n%s\n' "$more" >"$1/thing.c"
    cc -g -shared -fPIC -I"$T/abi/inc" -Wl,-soname,"$2" -o "$1/libthing.so" "$1/thing.c"
}
if mklib "$T/abi/v1" libthing.so.1 "" "" && abidw --headers-dir "$T/abi/inc" --out-file "$T/abi/v1.abi" "$T/abi/v1/libthing.so"; then
    mklib "$T/abi/v1b" libthing.so.1 "" "int thing_more(void);"
    if abi_check "$T/abi/v1.abi" "$T/abi/v1b/libthing.so" "$T/abi/inc" >/dev/null; then echo "PASS abi_check_allows_an_added_function"
    else echo "FAIL abi_check_allows_an_added_function"; fi
    mklib "$T/abi/v1c" libthing.so.1 " int c;" ""
    if out=$(abi_check "$T/abi/v1.abi" "$T/abi/v1c/libthing.so" "$T/abi/inc"); then
        echo "FAIL abi_check_catches_a_new_field_without_a_bump"
    else case $out in *"public ABI changed under soname libthing.so.1"*) echo "PASS abi_check_catches_a_new_field_without_a_bump" ;;
                      *) echo "FAIL abi_check_catches_a_new_field_without_a_bump: $out" ;; esac; fi
    mklib "$T/abi/v2" libthing.so.2 " int c;" ""
    if out=$(abi_check "$T/abi/v1.abi" "$T/abi/v2/libthing.so" "$T/abi/inc"); then
        echo "FAIL abi_check_wants_a_new_baseline_with_a_bump"
    else case $out in *"make abi-baseline"*) echo "PASS abi_check_wants_a_new_baseline_with_a_bump" ;;
                      *) echo "FAIL abi_check_wants_a_new_baseline_with_a_bump: $out" ;; esac; fi
    abidw --headers-dir "$T/abi/inc" --out-file "$T/abi/v2.abi" "$T/abi/v2/libthing.so"
    if abi_check "$T/abi/v2.abi" "$T/abi/v2/libthing.so" "$T/abi/inc" >/dev/null; then echo "PASS abi_check_passes_after_bump_and_baseline"
    else echo "FAIL abi_check_passes_after_bump_and_baseline"; fi
else
    echo "FAIL abi_check_sample_library_builds"
fi

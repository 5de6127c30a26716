#!/usr/bin/env bash
# test_python_capi.sh — the Python binding is a user of the public API (issue 26 item 5):
#  * python/bigmac/_capi.c includes no bigmac header but those of include/, and compiles with a
#    copy of include/ as its only include directory (no src/);
#  * every bigmac function it calls is exported by the shared library: linked against
#    libbigmac.so alone with --no-undefined (a hidden, private function does not link), and its
#    undefined bm_* symbols are a subset of `nm -D --defined-only libbigmac.so`;
#  * the library functions python/bigmac/__init__.py calls by name through ctypes are exported;
#  * the check itself fails a binding that calls a private function (bm_table_flow, src/table/flow.h).
. "$(dirname "$0")/lib.sh"
T=$TEST_TMP
B=${TEST_BUILD:-build}
LIB=$B/libbigmac.so
CAPI=python/bigmac/_capi.c
[ -e "$LIB" ] || { echo "FAIL capi_library_built: $LIB missing (make shared)"; exit 0; }
CC=${CC:-cc}

# the public headers only, in a directory of their own
mkdir -p "$T/inc"
cp include/*.h "$T/inc/"
nm -D --defined-only "$LIB" | awk '$2 == "T" || $2 == "W" {print $3}' | sort -u >"$T/exported"

# capi_check FILE: 0 when FILE includes only public bigmac headers, compiles with them alone and
# calls only exported bigmac functions; else prints why and returns 1
capi_check() {
    local src=$1 bad
    bad=$(grep -o '^#include *"[^"]*"' "$src" | sed 's/.*"\(.*\)"/\1/' | while read -r h; do
        [ -f "include/$h" ] || echo "$h"; done)
    if [ -n "$bad" ]; then echo "includes non-public headers: $bad"; return 1; fi
    if ! $CC -std=c11 -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -fPIC -I"$T/inc" -c "$src" -o "$T/capi.o" \
        2>"$T/cc.err"; then
        echo "does not compile with include/ alone: $(head -3 "$T/cc.err")"; return 1
    fi
    nm -u "$T/capi.o" | awk '{print $2}' | grep '^bm_' | sort -u >"$T/called"
    local missing
    missing=$(comm -23 "$T/called" "$T/exported")
    if [ -n "$missing" ]; then echo "calls functions libbigmac.so does not export: $(echo $missing)"; return 1; fi
    if ! $CC -shared -o "$T/capi.so" "$T/capi.o" -L"$B" -lbigmac -ljansson -Wl,--no-undefined \
        -Wl,-rpath-link,"$B" 2>"$T/ld.err"; then
        echo "does not link against libbigmac.so alone: $(grep -m3 'undefined' "$T/ld.err")"; return 1
    fi
    return 0
}

if out=$(capi_check "$CAPI"); then
    n=$(wc -l <"$T/called")
    if [ "$n" -ge 20 ]; then echo "PASS capi_public_api_only ($n library functions, all exported)"
    else echo "FAIL capi_public_api_only: only $n bm_* functions seen in _capi.o (nm -u)"; fi
else echo "FAIL capi_public_api_only: $out"; fi

# what __init__.py calls by name: _sig("bm_...") and _names("bm_...")
grep -o '_\(sig\|names\)("bm_[a-z0-9_]*"' python/bigmac/__init__.py | sed 's/.*"\(bm_[a-z0-9_]*\)"/\1/' | sort -u >"$T/py"
missing=$(comm -23 "$T/py" "$T/exported")
if [ -s "$T/py" ] && [ -z "$missing" ]; then echo "PASS capi_python_calls_exported ($(wc -l <"$T/py") by name)"
else echo "FAIL capi_python_calls_exported: $(echo $missing)"; fi

# the check's own sensitivity: a private header, and a private function declared by hand
sed 's|#include "bigmac_report.h"|&\n#include "table/flow.h"|' "$CAPI" >"$T/priv_include.c"
if out=$(capi_check "$T/priv_include.c"); then echo "FAIL capi_check_catches_a_private_header"
else case $out in *"non-public headers: table/flow.h"*) echo "PASS capi_check_catches_a_private_header" ;;
                  *) echo "FAIL capi_check_catches_a_private_header: $out" ;; esac; fi
{ cat "$CAPI"; printf '%s\n' 'struct bm_flow;' 'const struct bm_flow *bm_table_flow(const struct bm_table *t);' \
    'const void *bmpy_private_flow(const void *t) { return bm_table_flow(t); }'; } >"$T/priv_call.c"
if out=$(capi_check "$T/priv_call.c"); then echo "FAIL capi_check_catches_a_private_function"
else case $out in *"does not export: bm_table_flow"*) echo "PASS capi_check_catches_a_private_function" ;;
                  *) echo "FAIL capi_check_catches_a_private_function: $out" ;; esac; fi

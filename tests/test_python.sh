#!/usr/bin/env bash
# The Python package (python/bigmac, docs/python.md): every tests/python/test_*.py under
# /usr/bin/python3 with PYTHONPATH=python, each printing PASS/FAIL lines. The torch tests need
# python3-torch (make deps); without it they say so and fail.
set -u
cd "$(dirname "$0")/.."
: "${TEST_BUILD:=build}"
: "${BIGMAC:=bin/bigmac}"
PY=${PYTHON:-/usr/bin/python3}
lib=$TEST_BUILD/python/_bigmac.so
if [ ! -f "$lib" ]; then echo "FAIL python: $lib not built (make)"; exit 1; fi
# A sanitizer build's shared object cannot be loaded into an uninstrumented python: the
# package is tested by the normal build only.
if nm -D "$lib" 2>/dev/null | grep -q __asan_init; then echo "SKIP python: $lib is a sanitizer build (the package is tested by the plain build)"; exit 0; fi
export BIGMAC_LIB=$lib BIGMAC PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
rc=0
for t in tests/python/test_*.py; do
    timeout "${PY_TEST_TIMEOUT:-240}" "$PY" "$t" || { echo "FAIL $(basename "$t") (exit $?)"; rc=1; }
done
# make install puts the package (and its shared object) under the prefix: it imports from there
prefix=$(mktemp -d) repo=$PWD
if make --no-print-directory -s BUILD="$TEST_BUILD" BIN="${TEST_BIN:-bin}" install PREFIX="$prefix" >/dev/null 2>&1; then
    pydir=$(cd "$prefix" && ls -d lib/python*/dist-packages 2>/dev/null | head -1)
    if (cd /tmp && env -u BIGMAC_LIB PYTHONPATH="$prefix/$pydir" "$PY" -c "
import bigmac, os
assert bigmac._find_lib().startswith('$prefix'), bigmac._find_lib()
t = bigmac.plan('$repo/tests/specs/exec-small.json', pp=2)
bigmac.verify(t)
print(len(t.ops[0]))" >/dev/null); then echo "PASS python_make_install_imports"; else echo "FAIL python_make_install_imports"; rc=1; fi
else
    echo "FAIL python_make_install_imports: make install failed"; rc=1
fi
rm -rf "$prefix"
exit $rc

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
if nm -D "$lib" 2>/dev/null | grep -q __asan_init; then echo "skip python: $lib is a sanitizer build"; exit 0; fi
export BIGMAC_LIB=$lib BIGMAC PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
rc=0
for t in tests/python/test_*.py; do
    timeout "${PY_TEST_TIMEOUT:-240}" "$PY" "$t" || { echo "FAIL $(basename "$t") (exit $?)"; rc=1; }
done
exit $rc

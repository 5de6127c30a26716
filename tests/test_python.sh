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
export BIGMAC_LIB=$lib BIGMAC PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
# A sanitizer build (make asan) runs in the uninstrumented python with the ASan runtime preloaded
# (it must come first; the library pulls in UBSan's itself) and libstdc++ right after it: torch
# loads libstdc++ after the runtime has started, and ASan's __cxa_throw interceptor then finds no
# real __cxa_throw, so the first C++ exception (gloo's "connection closed", a timeout) aborts
# the process ("CHECK failed: asan_interceptors.cpp:320"). Python keeps allocations until exit by
# design, so leak detection is off.
# PY_TESTS: the files to run (tests/test_python_faults.sh runs tests/python/faults_*.py).
tests=(${PY_TESTS:-tests/python/test_*.py})
if nm -D "$lib" 2>/dev/null | grep -q __asan_init; then
    asan_rt=$(${CC:-cc} -print-file-name=libasan.so)
    cxx_rt=$(${CC:-cc} -print-file-name=libstdc++.so.6)
    if [ ! -f "$asan_rt" ]; then echo "FAIL python: the ASan runtime ($asan_rt) is missing"; exit 1; fi
    export LD_PRELOAD=$asan_rt$([ -f "$cxx_rt" ] && echo ":$cxx_rt")${LD_PRELOAD:+:$LD_PRELOAD}
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    echo "python: sanitizer build, LD_PRELOAD=$LD_PRELOAD"
    # Under ASan the files that call the C library run; the torch files that only train (their
    # C calls, plan and load, are the ones the others make) run in make test only.
    if [ -z "${PY_TESTS:-}" ]; then
        torch_only="digits dp example frozen vshape" kept=()
        for t in "${tests[@]}"; do
            n=$(basename "$t" .py); n=${n#test_torch_}
            case " $torch_only " in *" $n "*) ;; *) kept+=("$t") ;; esac
        done
        tests=("${kept[@]}")
        echo "SKIP python_torch_training_files_under_asan: test_torch_{${torch_only// /,}}.py run in make test only (they exercise torch; their C calls are the other files')"
    fi
fi
rc=0
for t in "${tests[@]}"; do
    timeout "${PY_TEST_TIMEOUT:-240}" "$PY" "$t" || { echo "FAIL $(basename "$t") (exit $?)"; rc=1; }
done
[ -n "${PY_TESTS:-}" ] && exit $rc
# make install puts the package (and its shared object) under the prefix: it imports from there
prefix=$(mktemp -d) repo=$PWD
if env -u LD_PRELOAD make --no-print-directory -s BUILD="$TEST_BUILD" BIN="${TEST_BIN:-bin}" install PREFIX="$prefix" >/dev/null 2>&1; then
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

#!/usr/bin/env bash
# test_fuzz_short.sh — a short libFuzzer run of every fuzz target (fuzz/fuzz_*.c) as part of the
# suite: builds them with `make fuzz-build` (clang, ASan+UBSan, build-fuzz/) and runs each for
# FUZZ_SHORT_SECONDS (6) from the seed corpus tests/corpus/<target>/ (never written to). A crash,
# leak, timeout or out-of-memory is a FAIL that names the saved input. The long runs are
# `make fuzz` (docs/hardening.md). Skips (one PASS line saying so) only when clang or its libFuzzer
# runtime is missing, as on a dev machine without libclang-rt-14-dev; CI installs both. `make asan`
# skips it: the targets are the same ASan+UBSan binaries (build-fuzz/) `make test` just ran.
. "$(dirname "$0")/lib.sh"

secs=${FUZZ_SHORT_SECONDS:-6}
if [ -n "${TEST_SAN:-}" ]; then
    echo "SKIP fuzz_short: make asan runs the same sanitized fuzz binaries (build-fuzz/) make test ran"
    exit 0
fi
cc=${FUZZ_CC:-clang}
work=$TEST_TMP/fuzz_short
mkdir -p "$work"

printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
    >"$work/probe.c"
if ! command -v "$cc" >/dev/null 2>&1 ||
    ! "$cc" -fsanitize=fuzzer,address,undefined "$work/probe.c" -o "$work/probe" >"$work/probe.log" 2>&1; then
    echo "SKIP fuzz_short: clang libFuzzer runtime missing (make deps installs clang libclang-rt-14-dev)"
    exit 0
fi

if ! make --no-print-directory fuzz-build >"$work/build.log" 2>&1; then
    echo "FAIL fuzz_build: make fuzz-build failed"
    tail -20 "$work/build.log" | sed 's/^/    /'
    exit 1
fi

for f in fuzz/fuzz_*.c; do
    t=$(basename "$f" .c)
    t=${t#fuzz_}
    bin=build-fuzz/fuzz/fuzz_$t
    mkdir -p "$work/corpus-$t" "$work/artifacts"
    dict=fuzz/$t.dict
    [ -f "$dict" ] || dict=fuzz/json.dict
    [ "$t" = plan ] && dict=
    dict=${dict:+-dict=$dict}
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 $dict \
        -artifact_prefix="$work/artifacts/$t-" "$work/corpus-$t" "tests/corpus/$t" >"$work/$t.log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/$t.log" | awk '{print $2}')
    if [ "$rc" -eq 0 ]; then
        echo "PASS fuzz_$t (${execs:-?} executions in ${secs}s)"
    else
        echo "FAIL fuzz_$t: libFuzzer exit $rc after ${execs:-?} executions"
        grep -E 'ERROR|SUMMARY|Test unit written|runtime error|verification|does not' "$work/$t.log" | head -10 | sed 's/^/    /'
        for a in "$work/artifacts/$t-"*; do
            [ -f "$a" ] || continue
            mkdir -p build-fuzz/artifacts
            cp "$a" build-fuzz/artifacts/ && echo "    input kept: build-fuzz/artifacts/$(basename "$a")"
        done
    fi
done

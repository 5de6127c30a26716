#!/usr/bin/env bash
# test_runner.sh — tests/run.sh's summary line, on a copy of it running three fake tests in a
# scratch tree: "N passed, N failed" as before when nothing is skipped; ", N skipped" appended
# (and the SKIP line repeated with its test's name) when a test prints "SKIP name: why".
cd "$(dirname "$0")/.."
. tests/lib.sh
R=$TEST_TMP/runner
mkdir -p "$R/tests" "$R/build/tests"
cp tests/run.sh "$R/tests/run.sh"
printf 'echo "PASS a1"\necho "PASS a2"\n' >"$R/tests/test_a.sh"
printf 'echo "PASS b1"\n' >"$R/tests/test_b.sh"
expect_exit runner_no_skip 0 env TEST_BUILD=build bash "$R/tests/run.sh"
if [ "$(printf '%s\n' "$OUT_TXT" | tail -1)" = "3 passed, 0 failed" ]; then echo "PASS runner_summary_without_skips"; else
    echo "FAIL runner_summary_without_skips: $(printf '%s\n' "$OUT_TXT" | tail -1)"; fi
printf 'echo "SKIP c: needs root"\n' >"$R/tests/test_c.sh"
expect_exit runner_skip_is_no_failure 0 env TEST_BUILD=build bash "$R/tests/run.sh"
if [ "$(printf '%s\n' "$OUT_TXT" | tail -1)" = "3 passed, 0 failed, 1 skipped" ]; then echo "PASS runner_summary_counts_skips"; else
    echo "FAIL runner_summary_counts_skips: $(printf '%s\n' "$OUT_TXT" | tail -1)"; fi
expect_contains runner_names_the_skipped_test "test_c.sh: SKIP c: needs root"
printf 'echo "FAIL d1"\n' >"$R/tests/test_d.sh"
expect_exit runner_failure_still_fails 1 env TEST_BUILD=build bash "$R/tests/run.sh"
if [ "$(printf '%s\n' "$OUT_TXT" | tail -1)" = "3 passed, 1 failed, 1 skipped" ]; then echo "PASS runner_summary_fail_and_skip"; else
    echo "FAIL runner_summary_fail_and_skip: $(printf '%s\n' "$OUT_TXT" | tail -1)"; fi

#!/usr/bin/env bash
# test_runner.sh — tests/run.sh's summary line, on a copy of it running three fake tests in a
# scratch tree: "N passed, N failed" as before when nothing is skipped; ", N skipped" appended
# (and the SKIP line repeated with its test's name) when a test prints "SKIP name: why".
# (The copies run without the outer ONLY and TEST_JOBS.)
cd "$(dirname "$0")/.."
. tests/lib.sh
R=$TEST_TMP/runner
mkdir -p "$R/tests" "$R/build/tests"
cp tests/run.sh "$R/tests/run.sh"
printf 'echo "PASS a1"\necho "PASS a2"\n' >"$R/tests/test_a.sh"
printf 'echo "PASS b1"\n' >"$R/tests/test_b.sh"
expect_exit runner_no_skip 0 env -u ONLY -u TEST_JOBS TEST_BUILD=build  bash "$R/tests/run.sh"
if [ "$(printf '%s\n' "$OUT_TXT" | tail -1)" = "3 passed, 0 failed" ]; then echo "PASS runner_summary_without_skips"; else
    echo "FAIL runner_summary_without_skips: $(printf '%s\n' "$OUT_TXT" | tail -1)"; fi
printf 'echo "SKIP c: needs root"\n' >"$R/tests/test_c.sh"
expect_exit runner_skip_is_no_failure 0 env -u ONLY -u TEST_JOBS TEST_BUILD=build  bash "$R/tests/run.sh"
if [ "$(printf '%s\n' "$OUT_TXT" | tail -1)" = "3 passed, 0 failed, 1 skipped" ]; then echo "PASS runner_summary_counts_skips"; else
    echo "FAIL runner_summary_counts_skips: $(printf '%s\n' "$OUT_TXT" | tail -1)"; fi
expect_contains runner_names_the_skipped_test "test_c.sh: SKIP c: needs root"
printf 'echo "FAIL d1"\n' >"$R/tests/test_d.sh"
expect_exit runner_failure_still_fails 1 env -u ONLY -u TEST_JOBS TEST_BUILD=build  bash "$R/tests/run.sh"
if [ "$(printf '%s\n' "$OUT_TXT" | tail -1)" = "3 passed, 1 failed, 1 skipped" ]; then echo "PASS runner_summary_fail_and_skip"; else
    echo "FAIL runner_summary_fail_and_skip: $(printf '%s\n' "$OUT_TXT" | tail -1)"; fi


# the second lane: a test marked "# suite: waits" runs beside the others. Each fake test marks
# that it is running and waits (up to WAIT_S) for the other's mark: side by side each sees the
# other (at once: no timing is asserted); with TEST_JOBS=1 neither does. Totals and a failure's
# output as before; each test has its own TEST_TMP.
rm -f "$R"/tests/test_*.sh
fake() {  # fake NAME OTHER [LINES...]: marks R/NAME.on, waits for R/OTHER.on, writes R/NAME.saw;
          # having seen the other, stays until the other has seen it too (no race at the end)
    local name=$1 other=$2; shift 2
    printf '%s\n' "$@" "touch $R/$name.on; saw=alone" \
        "for i in \$(seq \$((WAIT_S * 10))); do [ -e $R/$other.on ] && { saw=saw; break; }; sleep 0.1; done" \
        "echo \$saw >$R/$name.saw" \
        "[ \$saw = saw ] && for i in \$(seq \$((WAIT_S * 10))); do [ -e $R/$other.saw ] && break; sleep 0.1; done" \
        "rm -f $R/$name.on" "echo $name >\"\$TEST_TMP/f\"" \
        "[ \"\$(cat \"\$TEST_TMP/f\")\" = $name ] && echo \"PASS ${name}_own_tmp\"" >"$R/tests/test_$name.sh"
}
fake w m '# suite: waits'
fake m w 'echo "FAIL m2: the excerpt"'
expect_exit runner_lanes_failure_fails 1 env -u ONLY -u TEST_JOBS WAIT_S=60 TEST_BUILD=build bash "$R/tests/run.sh"
if [ "$(printf '%s\n' "$OUT_TXT" | tail -1)" = "2 passed, 1 failed" ]; then echo "PASS runner_lanes_summary"; else
    echo "FAIL runner_lanes_summary: $(printf '%s\n' "$OUT_TXT" | tail -1)"; fi
expect_contains runner_lanes_print_the_failure "FAIL m2: the excerpt"
if [ "$(cat "$R/w.saw" "$R/m.saw" 2>&1 | tr '\n' ' ')" = "saw saw " ]; then echo "PASS runner_waiting_test_runs_beside_the_others"
else echo "FAIL runner_waiting_test_runs_beside_the_others: $(cat "$R/w.saw" "$R/m.saw" 2>&1 | tr '\n' ' ')"; fi
rm -f "$R"/*.saw "$R"/*.on
expect_exit runner_one_job 1 env -u ONLY -u TEST_JOBS WAIT_S=1 TEST_BUILD=build TEST_JOBS=1 bash "$R/tests/run.sh"
if [ "$(cat "$R/w.saw" "$R/m.saw" 2>&1 | tr '\n' ' ')" = "alone alone " ]; then echo "PASS runner_test_jobs_1_runs_one_at_a_time"
else echo "FAIL runner_test_jobs_1_runs_one_at_a_time: $(cat "$R/w.saw" "$R/m.saw" 2>&1 | tr '\n' ' ')"; fi

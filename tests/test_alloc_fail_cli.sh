#!/usr/bin/env bash
# test_alloc_fail_cli.sh — fault injection through the command line: BM_ALLOC_FAIL_AT=n makes the
# n-th allocation of the whole bigmac process fail (src/util/alloc.c). For n = 1, 2, ... each
# command must exit 0, or exit 1 saying "out of memory", never crash, hang or (under make asan)
# leak or trip a sanitizer. The sweep ends once 30 n in a row succeed (the failure then lands
# past the command's last allocation). Under the sanitizer build every third n is tried
# (ALLOC_CLI_STRIDE overrides), to keep the suite's time in check.
. "$(dirname "$0")/lib.sh"

stride=${ALLOC_CLI_STRIDE:-1}
case ${TEST_BUILD:-build} in *asan*) stride=${ALLOC_CLI_STRIDE:-3} ;; esac

# sweep NAME CODE CMD... : run the sweep (CODE: the command's exit status without failures),
# one PASS/FAIL line.
sweep() {
    local name=$1 code=$2; shift 2
    local n=1 ok_run=0 bad=0 tried=0 out rc
    while [ "$n" -le 5000 ]; do
        out=$(BM_ALLOC_FAIL_AT=$n timeout 20 "$@" 2>&1 >/dev/null)
        rc=$?
        tried=$((tried + 1))
        if printf '%s' "$out" | grep -qE 'Sanitizer|runtime error'; then
            rc=99
        fi
        if [ "$rc" -eq 1 ] && printf '%s' "$out" | grep -q "out of memory"; then
            ok_run=0 # a clean failure
        elif [ "$rc" -eq "$code" ]; then
            ok_run=$((ok_run + stride))
            [ "$ok_run" -ge 30 ] && break
        else
            ok_run=0
            bad=$((bad + 1))
            [ "$bad" -le 3 ] && {
                echo "  $name: BM_ALLOC_FAIL_AT=$n: exit $rc"
                printf '%s\n' "$out" | head -8 | sed 's/^/    /'
            }
        fi
        n=$((n + stride))
    done
    if [ "$n" -gt 5000 ]; then
        echo "FAIL $name: still failing at n=5000"
    elif [ "$bad" -eq 0 ]; then
        echo "PASS $name ($tried runs, every injected failure clean up to n=$((n - ok_run)))"
    else
        echo "FAIL $name: $bad of $tried runs did not fail cleanly"
    fi
}

sweep alloc_cli_plan 0 "$BIGMAC" plan examples/tiny-mllm.json -o "$TEST_TMP/alloc_cli_table.json"
sweep alloc_cli_verify 0 "$BIGMAC" verify tests/data/table_p2_m2.json
sweep alloc_cli_verify_order_violation 1 "$BIGMAC" verify tests/corpus/table/invalid-order.json
sweep alloc_cli_simulate_json 0 "$BIGMAC" simulate tests/specs/derive-roles.json --json

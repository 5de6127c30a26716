#!/usr/bin/env bash
# test_cli_verify.sh — `bigmac verify`: usage errors exit 2, failures exit 1 with the
# invariant named, a correct table exits 0 with a one-line summary.
. "$(dirname "$0")/lib.sh"

expect_exit verify_help 0 "$BIGMAC" verify --help
expect_contains verify_help_usage "usage: bigmac verify TABLE.json"
expect_exit verify_no_args 2 "$BIGMAC" verify
expect_contains verify_no_args_says_why "bigmac: error: verify: which table?"
expect_exit verify_two_tables 2 "$BIGMAC" verify a.json b.json
expect_exit verify_unknown_flag 2 "$BIGMAC" verify --frobnicate t.json
expect_exit verify_missing_file 1 "$BIGMAC" verify "$TEST_TMP/no-such-table.json"
expect_contains verify_missing_file_error "bigmac: error:"

# The JSON checks need the table loader (src/table/json.c); until it is in the tree the
# loader fallback says so and these are skipped.
d=$(dirname "$0")/data
OUT_TXT=$("$BIGMAC" verify "$d/table_p2_m2.json" 2>&1)
if printf '%s' "$OUT_TXT" | grep -q "loader is not built"; then
    echo "skip: table loader not built; JSON verify checks skipped" >&2
else
    expect_exit verify_json_ok 0 "$BIGMAC" verify "$d/table_p2_m2.json"
    expect_contains verify_json_ok_summary "table_p2_m2.json: OK"
    expect_contains verify_json_ok_counts "2 ranks, 24 ops, invariants 1-4 hold"
    expect_exit verify_json_deadlock 1 "$BIGMAC" verify "$d/table_p2_m2_deadlock.json"
    expect_contains verify_json_deadlock_invariant "invariant 2 (deadlock freedom) violated"
    expect_contains verify_json_deadlock_op "  rank 0 blocked at op #0 RECV_B:grad:llm.c0.out:0<1"
    expect_contains verify_json_deadlock_cycle "cycle: rank 0 -> rank 1 -> rank 0"
    # the simulator words a deadlock as the verifier does (one report: src/table/match.c)
    v_lines=$(printf '%s\n' "$OUT_TXT" | grep '^  \(cycle\|rank\)')
    expect_exit simulate_json_deadlock 1 "$BIGMAC" render "$d/table_p2_m2_deadlock.json" --format ascii
    expect_contains simulate_json_deadlock_headline "2 of 2 ranks cannot finish (each waits for a send that never happens)"
    s_lines=$(printf '%s\n' "$OUT_TXT" | grep '^  \(cycle\|rank\)')
    if [ -n "$v_lines" ] && [ "$v_lines" = "$s_lines" ]; then echo "PASS simulate_deadlock_lines_equal_verifiers"; else
        echo "FAIL simulate_deadlock_lines_equal_verifiers"; diff <(echo "$v_lines") <(echo "$s_lines") | head; fi
fi

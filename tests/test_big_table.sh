#!/usr/bin/env bash
# test_big_table.sh — bigmac reads back every table it writes (issue 27 case 10): a plan of
# P=64 V=4 M=1024 (1.58 M ops, 115 MB of JSON, over the old 64 MiB limit) round-trips through
# verify, simulate --table, render and the CSV form, in bounded memory (the table loader streams
# the ops: peak RSS under 2.5 times the file, 6 under a sanitizer, where the jansson tree took 12). Its inputs
# live in $TEST_TMP and are deleted at the end.
. "$(dirname "$0")/lib.sh"

T=$TEST_TMP/big_table
mkdir -p "$T"
# tiny-mllm with a continuous backbone split (no "layers"), so P*V = 256 chunks plan
sed 's/"layers": 8,//' examples/tiny-mllm.json >"$T/spec.json"

expect_exit big_plan 0 "$BIGMAC" plan "$T/spec.json" --pp 64 --vpp 4 --microbatches 1024 -o "$T/big.json"
plan_ms=$(printf '%s' "$OUT_TXT" | sed -n 's/^nominal makespan \([0-9.]*\) ms.*/\1/p')
size=$(stat -c %s "$T/big.json")
[ "$size" -gt $((64 << 20)) ] && echo "PASS big_table_over_old_limit ($size bytes)" ||
    echo "FAIL big_table_over_old_limit: $size bytes"

# peak_kb CMD...: run CMD under GNU time; its exit status, output in $OUT_TXT, peak RSS in $PEAK_KB
peak_kb() {
    OUT_TXT=$(/usr/bin/time -f 'PEAK_KB %M' "$@" 2>&1)
    local rc=$?
    PEAK_KB=$(printf '%s' "$OUT_TXT" | sed -n 's/^PEAK_KB //p' | tail -1)
    return $rc
}
# the bound: 2.5 times the file; a sanitizer build's allocator (redzones, quarantine) gets 6 times,
# still half of what one JSON tree of the ops took (12 times)
factor_x2=5
if nm "$BIGMAC" 2>/dev/null | grep -q __asan_init; then factor_x2=12; fi
bound_kb=$((size * factor_x2 / 2 / 1024))

if peak_kb "$BIGMAC" verify "$T/big.json"; then echo "PASS big_verify"; else echo "FAIL big_verify"; echo "$OUT_TXT" | head -5; fi
expect_contains_out() { printf '%s' "$OUT_TXT" | grep -qF -- "$2" && echo "PASS $1" || { echo "FAIL $1: output lacks: $2"; echo "$OUT_TXT" | head -5; }; }
expect_contains_out big_verify_counts "64 ranks, 1580928 ops, invariants 1-5 hold"
[ "${PEAK_KB:-0}" -gt 0 ] && [ "$PEAK_KB" -lt "$bound_kb" ] && echo "PASS big_verify_memory (${PEAK_KB} KB < ${bound_kb} KB)" ||
    echo "FAIL big_verify_memory: peak ${PEAK_KB} KB, bound ${bound_kb} KB"

# simulate --table predicts the plan's own makespan (the table and the spec are the plan's)
if peak_kb "$BIGMAC" simulate "$T/spec.json" --table "$T/big.json"; then echo "PASS big_simulate_table"; else echo "FAIL big_simulate_table"; echo "$OUT_TXT" | head -5; fi
sim_ms=$(printf '%s' "$OUT_TXT" | sed -n 's/^makespan \([0-9.]*\) ms.*/\1/p')
[ -n "$plan_ms" ] && [ "$sim_ms" = "$plan_ms" ] && echo "PASS big_simulate_table_makespan ($sim_ms ms)" ||
    echo "FAIL big_simulate_table_makespan: simulate $sim_ms ms, plan $plan_ms ms"

# render draws it (and tells it is a table by a scan, with no tree of the whole file)
if peak_kb "$BIGMAC" render "$T/big.json" --format ascii; then echo "PASS big_render"; else echo "FAIL big_render"; echo "$OUT_TXT" | head -5; fi
expect_contains_out big_render_makespan "makespan $plan_ms ms"
[ "${PEAK_KB:-0}" -gt 0 ] && [ "$PEAK_KB" -lt "$bound_kb" ] && echo "PASS big_render_memory (${PEAK_KB} KB < ${bound_kb} KB)" ||
    echo "FAIL big_render_memory: peak ${PEAK_KB} KB, bound ${bound_kb} KB"

# JSON -> CSV -> JSON gives the byte-identical table (docs/csv.md), at this size too
expect_exit big_csv_write 0 "$BIGMAC" render "$T/big.json" --format csv -o "$T/big.csv"
expect_exit big_csv_read 0 "$BIGMAC" plan --from-csv "$T/big.csv" -o "$T/big2.json"
cmp -s "$T/big.json" "$T/big2.json" && echo "PASS big_csv_round_trip_identical" || echo "FAIL big_csv_round_trip_identical"

rm -rf "$T"

#!/usr/bin/env bash
# test_predict.sh — predicting a run (docs/simulator.md "Predicting a run"): `simulate SPEC
# --table TABLE` simulates the given table with SPEC's costs instead of planning (the same
# numbers as planning when the table is SPEC's own plan; another table's numbers when planning
# the calibrated spec would give another table), its refusals, and `calibrate --run-median`
# over several traces of one plan.
cd "$(dirname "$0")/.."
. tests/lib.sh
export OPENBLAS_NUM_THREADS=1
SPEC=examples/tiny-mllm.json
T=$TEST_TMP/predict
mkdir -p "$T"
mk() { printf '%s\n' "$OUT_TXT" | sed -n 's/^  "makespan_ms": \([0-9.e+-]*\).*/\1/p'; }
ex() { printf '%s\n' "$OUT_TXT" | sed -n 's/^  "expected_makespan_ms": \([0-9.e+-]*\).*/\1/p'; }
same() { # NAME A B: A and B are the same number (both non-empty)
    if [ -n "$2" ] && [ "$2" = "$3" ]; then echo "PASS $1"; else echo "FAIL $1: '$2' vs '$3'"; fi
}

# A spec with other costs (as `calibrate` would write: encoders 20x cheaper, a spread, a
# dispatch time and rank speeds); planning it gives bigmac another table than the nominal one.
sed -e 's/"fwd_ms": 1, "bwd_ms": 2, "act_mib": 2, "state_mib": 1, "out_mib": 0.1}}/"fwd_ms": 0.05, "bwd_ms": 0.06, "act_mib": 2, "state_mib": 1, "out_mib": 0.1, "spread": 0.2}}/' \
    -e 's/"link_latency_us": 20}/"link_latency_us": 20, "op_overhead_us": 3, "rank_time_scale": [1, 1.1]}/' \
    $SPEC >"$T/cal.json"
if grep -q '"spread": 0.2' "$T/cal.json" && grep -q '"op_overhead_us": 3' "$T/cal.json"; then
    echo "PASS predict_spec_edited"; else echo "FAIL predict_spec_edited"; fi

for pol in bigmac optimus unified; do
    expect_exit plan_nominal_$pol 0 "$BIGMAC" plan $SPEC --pp 2 --unit 2 --policy $pol -o "$T/nom_$pol.json"
    expect_exit plan_cal_$pol 0 "$BIGMAC" plan "$T/cal.json" --pp 2 --unit 2 --policy $pol -o "$T/cal_$pol.json"
    # a spec's own plan: --table gives exactly what planning gives (plain and expected makespan)
    expect_exit simulate_planned_$pol 0 "$BIGMAC" simulate "$T/cal.json" --pp 2 --unit 2 --policy $pol --json
    a=$(mk) ea=$(ex)
    expect_exit simulate_own_table_$pol 0 "$BIGMAC" simulate "$T/cal.json" --table "$T/cal_$pol.json" --json
    same own_table_same_makespan_$pol "$a" "$(mk)"
    same own_table_same_expected_$pol "$ea" "$(ex)"
    # the nominal spec's plan with the nominal spec: the same as simulating the nominal spec
    expect_exit simulate_nominal_$pol 0 "$BIGMAC" simulate $SPEC --pp 2 --unit 2 --policy $pol --json
    n=$(mk)
    expect_exit simulate_nominal_table_$pol 0 "$BIGMAC" simulate $SPEC --table "$T/nom_$pol.json" --json
    same nominal_table_same_makespan_$pol "$n" "$(mk)"
done
# bigmac's table planned with the other costs is another table; --table predicts the given one
if cmp -s "$T/nom_bigmac.json" "$T/cal_bigmac.json"; then echo "FAIL predict_replanning_changes_bigmac_table"
else echo "PASS predict_replanning_changes_bigmac_table"; fi
expect_exit simulate_cal_on_nominal_table 0 "$BIGMAC" simulate "$T/cal.json" --table "$T/nom_bigmac.json" --json
c=$(mk)
expect_exit simulate_cal_planned_again 0 "$BIGMAC" simulate "$T/cal.json" --pp 2 --unit 2 --policy bigmac --json
if [ -n "$c" ] && [ "$c" != "$(mk)" ] && [ "$c" != "$n" ]; then echo "PASS table_costs_are_the_specs"
else echo "FAIL table_costs_are_the_specs: $c (planned again $(mk), nominal $n)"; fi
expect_exit simulate_table_human 0 "$BIGMAC" simulate "$T/cal.json" --table "$T/nom_bigmac.json"
expect_contains simulate_table_human_expected "expected makespan under the modules' op-time spread"
# the other dispatch numbers reach the given table from SPEC: a step lead of 0.5 ms starts every
# rank's first op, and so every op, 0.5 ms later (makespan + 0.5 exactly); a dispatch sd is named
# in the expected makespan's line
sed 's/"op_overhead_us": 3,/"op_overhead_us": 3, "step_lead_us": 500,/' "$T/cal.json" >"$T/lead.json"
sed 's/"op_overhead_us": 3,/"op_overhead_us": 3, "op_overhead_sd_us": 6,/' "$T/cal.json" >"$T/sd.json"
expect_exit simulate_table_lead 0 "$BIGMAC" simulate "$T/lead.json" --table "$T/nom_bigmac.json" --json
r=$(awk -v a="$(mk)" -v c="$c" 'BEGIN{d = a - c - 0.5; print (c != "" && d < 1e-9 && d > -1e-9) ? "ok" : "off " a " " c}')
if [ "$r" = ok ]; then echo "PASS simulate_table_lead_shifts_every_op"; else echo "FAIL simulate_table_lead_shifts_every_op: $r"; fi
expect_exit simulate_table_dispatch_sd 0 "$BIGMAC" simulate "$T/sd.json" --table "$T/nom_bigmac.json"
expect_contains simulate_table_dispatch_sd_named "op-time spread and the dispatch spread: "

# refusals
expect_exit table_with_plan_flags 2 "$BIGMAC" simulate "$T/cal.json" --table "$T/nom_bigmac.json" --pp 2
expect_contains table_with_plan_flags_message "--table simulates the table as it is"
expect_exit table_with_compare 2 "$BIGMAC" simulate "$T/cal.json" --table "$T/nom_bigmac.json" --compare
expect_exit table_needs_value 2 "$BIGMAC" simulate "$T/cal.json" --table
expect_exit table_missing_file 1 "$BIGMAC" simulate "$T/cal.json" --table "$T/none.json"
sed 's/"name": "dit"/"name": "dit2"/' "$T/cal.json" >"$T/other.json"
expect_exit table_module_not_in_spec 1 "$BIGMAC" simulate "$T/other.json" --table "$T/nom_bigmac.json"
expect_contains table_module_not_in_spec_message 'module "dit" is not in'
sed 's/"rank_time_scale": \[1, 1.1\]/"rank_time_scale": [1, 1.1, 1]/' "$T/cal.json" >"$T/three.json"
expect_exit table_rank_scale_other_pp 1 "$BIGMAC" simulate "$T/three.json" --table "$T/nom_bigmac.json"
expect_contains table_rank_scale_other_pp_message "device.rank_time_scale has 3 entries"

# calibrate --run-median over three traces of one plan (--local: no MPI)
for i in 1 2 3; do
    expect_exit local_trace_$i 0 "$BIGMAC" train $SPEC --local --pp 2 --unit 2 --steps 1 --quiet --trace "$T/run$i.json"
done
expect_exit calibrate_run_median 0 "$BIGMAC" calibrate "$T"/run[123].json --spec $SPEC --mean --run-median \
    --rank-scale --spread -o "$T/median.json"
if grep -q '"rank_time_scale"' "$T/median.json" && grep -q '"op_overhead_us"' "$T/median.json" &&
    grep -q '"spread"' "$T/median.json" && grep -q '"values"' "$T/median.json"; then
    echo "PASS calibrate_run_median_writes_every_number"; else echo "FAIL calibrate_run_median_writes_every_number"; fi
expect_exit predict_from_run_median 0 "$BIGMAC" simulate "$T/median.json" --table "$T/nom_bigmac.json" --json
expect_contains predict_from_run_median_expected '"expected_makespan_ms"'

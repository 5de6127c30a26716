# test_simulate.sh — `bigmac simulate` and `bigmac sweep`: output shape, JSON keys, exit codes.
# JSON is checked with grep (no python on CI).
. "$(dirname "$0")/lib.sh"
SPEC=examples/tiny-mllm.json

# expect_json_key NAME KEY : the last output has "KEY": somewhere.
expect_json_key() {
    local name=$1 key=$2
    if printf '%s' "$OUT_TXT" | grep -q "\"$key\": "; then echo "PASS $name"; else
        echo "FAIL $name: no \"$key\""; printf '%s\n' "$OUT_TXT" | head -20 | sed 's/^/    /'; fi
}
# expect_one_object NAME : stdout is exactly one JSON object ('{' first line, '}' last line, one top level).
expect_one_object() {
    local name=$1 first last top
    first=$(printf '%s\n' "$OUT_TXT" | head -1)
    last=$(printf '%s\n' "$OUT_TXT" | tail -1)
    top=$(printf '%s\n' "$OUT_TXT" | grep -c '^[{}]')
    if [ "$first" = "{" ] && [ "$last" = "}" ] && [ "$top" -eq 2 ]; then echo "PASS $name"; else
        echo "FAIL $name: not one JSON object"; printf '%s\n' "$OUT_TXT" | head -5 | sed 's/^/    /'; fi
}
# expect_count NAME TEXT N : TEXT occurs on exactly N lines of the last output.
expect_count() {
    local name=$1 text=$2 n=$3 got
    got=$(printf '%s\n' "$OUT_TXT" | grep -cF -- "$text")
    if [ "$got" -eq "$n" ]; then echo "PASS $name"; else
        echo "FAIL $name: '$text' on $got lines, wanted $n"; fi
}

# ---- simulate, human
expect_exit sim_human 0 "$BIGMAC" simulate "$SPEC"
expect_contains sim_human_makespan "makespan"
expect_contains sim_human_header "busy ms"
expect_contains sim_human_policy "policy bigmac"

# ---- simulate --json (stdout only)
OUT_TXT=$("$BIGMAC" simulate "$SPEC" --json 2>/dev/null); rc=$?
[ $rc -eq 0 ] && echo "PASS sim_json_exit" || echo "FAIL sim_json_exit: $rc"
expect_one_object sim_json_one_object
for k in policy backbone pp vpp microbatches makespan_ms bubble_ratio samples_per_s oom ranks \
         rank busy_ms idle_ms peak_mem_gib peak_act_gib encoder backbone generator; do
    expect_json_key "sim_json_key_$k" "$k"
done
expect_count sim_json_ranks '"rank": ' 4
expect_contains sim_json_policy '"policy": "bigmac"'

OUT_TXT=$("$BIGMAC" simulate "$SPEC" --json --pp 2 --vpp 1 --backbone 1f1b --microbatches 4 --policy none 2>/dev/null)
expect_count sim_flags_pp '"rank": ' 2
expect_contains sim_flags_policy '"policy": "none"'
expect_contains sim_flags_backbone '"backbone": "1f1b"'
expect_contains sim_flags_mb '"microbatches": 4'

# ---- --compare
OUT_TXT=$("$BIGMAC" simulate "$SPEC" --compare --json 2>/dev/null)
expect_one_object cmp_json_one_object
expect_json_key cmp_json_results results
expect_json_key cmp_json_bound zero_bubble_bound_ms
for p in bigmac optimus unified unified-balanced ideal none; do
    expect_contains "cmp_json_has_$p" "\"policy\": \"$p\""
done
expect_count cmp_json_six '"policy": ' 6
expect_json_key cmp_json_lower_bound lower_bound_ms
# the lower bound is at or under every policy's makespan except none's (which runs less work)
if printf '%s' "$OUT_TXT" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
lb = j["lower_bound_ms"]
ok = lb is not None and lb > 0
for r in j["results"]:
    if r["policy"] != "none" and "makespan_ms" in r:
        ok = ok and lb <= r["makespan_ms"] * (1 + 1e-9)
sys.exit(0 if ok else 1)'; then echo "PASS cmp_json_lower_bound_below_makespans"; else echo "FAIL cmp_json_lower_bound_below_makespans"; fi
expect_exit cmp_human 0 "$BIGMAC" simulate "$SPEC" --compare
expect_contains cmp_human_bound "zero-added-bubble bound"
expect_contains cmp_human_lower "lower bound: "
expect_contains cmp_human_ratio "/ lower"
# --search: off is the list scheduler alone, never faster than the default; bad values refused
U=examples/understanding-qwen3-30b-a3b.json
ON=$("$BIGMAC" simulate "$U" --pp 8 --vpp 1 --backbone 1f1b --microbatches 32 --window 3 --json 2>/dev/null)
OFF=$("$BIGMAC" simulate "$U" --pp 8 --vpp 1 --backbone 1f1b --microbatches 32 --window 3 --json --search off 2>/dev/null)
if /usr/bin/python3 -c '
import json, sys
on, off = json.loads(sys.argv[1])["makespan_ms"], json.loads(sys.argv[2])["makespan_ms"]
sys.exit(0 if on < off else 1)' "$ON" "$OFF"; then echo "PASS sim_search_off_is_slower"; else echo "FAIL sim_search_off_is_slower"; fi
expect_exit sim_search_zero 2 "$BIGMAC" simulate "$SPEC" --search 0
expect_exit sim_search_word 2 "$BIGMAC" simulate "$SPEC" --search many
expect_exit sim_search_missing 2 "$BIGMAC" simulate "$SPEC" --search
expect_exit sim_search_count 0 "$BIGMAC" simulate "$SPEC" --search 100
OUT_TXT=$("$BIGMAC" simulate "$SPEC" --compare --json --jitter 0.2 2>/dev/null)
expect_contains cmp_json_jitter_no_lower_bound '"lower_bound_ms": null'

# ---- jitter: reproducible by seed, 0 = none
A=$("$BIGMAC" simulate "$SPEC" --json --jitter 0.3 --seed 5 2>/dev/null)
B=$("$BIGMAC" simulate "$SPEC" --json --jitter 0.3 --seed 5 2>/dev/null)
C=$("$BIGMAC" simulate "$SPEC" --json --jitter 0.3 --seed 6 2>/dev/null)
Z=$("$BIGMAC" simulate "$SPEC" --json --jitter 0 --seed 6 2>/dev/null)
N=$("$BIGMAC" simulate "$SPEC" --json 2>/dev/null)
[ -n "$A" ] && [ "$A" = "$B" ] && echo "PASS jitter_same_seed" || echo "FAIL jitter_same_seed"
[ "$A" != "$C" ] && echo "PASS jitter_other_seed" || echo "FAIL jitter_other_seed"
[ -n "$Z" ] && [ "$Z" = "$N" ] && echo "PASS jitter_zero_is_none" || echo "FAIL jitter_zero_is_none"

# ---- usage errors exit 2, runtime errors 1
expect_exit sim_no_spec 2 "$BIGMAC" simulate
expect_exit sim_bad_flag 2 "$BIGMAC" simulate "$SPEC" --frobnicate
expect_contains sim_bad_flag_msg "unknown flag"
expect_exit sim_bad_jitter 2 "$BIGMAC" simulate "$SPEC" --jitter -1
expect_exit sim_bad_jitter_text 2 "$BIGMAC" simulate "$SPEC" --jitter abc
expect_exit sim_bad_seed 2 "$BIGMAC" simulate "$SPEC" --seed x
expect_exit sim_missing_value 2 "$BIGMAC" simulate "$SPEC" --seed
expect_exit sim_bad_pp 2 "$BIGMAC" simulate "$SPEC" --pp 0
expect_exit sim_bad_policy 2 "$BIGMAC" simulate "$SPEC" --policy fastest
expect_exit sim_two_specs 2 "$BIGMAC" simulate "$SPEC" "$SPEC"
expect_exit sim_missing_file 1 "$BIGMAC" simulate "$TEST_TMP/nope.json"
expect_contains sim_missing_file_msg "bigmac: error:"
expect_exit sim_help 0 "$BIGMAC" simulate --help
expect_contains sim_help_text "usage: bigmac simulate"

# ---- sweep
expect_exit sweep_human 0 "$BIGMAC" sweep "$SPEC" --pp 2,4 --vpp 1,2 --microbatches 4,8 --policy bigmac
expect_contains sweep_human_best "best: "
expect_contains sweep_human_progress "sweep: [8/8]"
OUT_TXT=$("$BIGMAC" sweep "$SPEC" --pp 2,4 --vpp 1,2 --microbatches 4,8 --policy bigmac,none --json 2>/dev/null)
expect_one_object sweep_json_one_object
for k in results skipped best samples_per_s peak_mem_gib oom mem_cap_gib; do
    expect_json_key "sweep_json_key_$k" "$k"
done
# 16 rows + best's copy
expect_count sweep_json_rows '"makespan_ms": ' 17
# vpp 1 rows of an interleaved spec run 1f1b; vpp 2 rows interleaved
OUT_TXT=$("$BIGMAC" sweep "$SPEC" --pp 4 --vpp 1,2 --microbatches 8 --policy none --json 2>/dev/null)
expect_contains sweep_vpp1_is_1f1b '"backbone": "1f1b"'
expect_contains sweep_vpp2_is_interleaved '"backbone": "interleaved"'
OUT_TXT=$("$BIGMAC" sweep "$SPEC" --pp 4 --vpp 1 --microbatches 8 --policy none --backbone gpipe --json 2>/dev/null)
expect_contains sweep_backbone_flag '"backbone": "gpipe"'
# interleaved with M % P != 0 is skipped with a note, the rest still run
expect_exit sweep_skips_invalid 0 "$BIGMAC" sweep "$SPEC" --pp 3,4 --vpp 2 --microbatches 4 --policy none
expect_contains sweep_skip_note "skipped: pp 3 vpp 2 microbatches 4"
expect_contains sweep_skip_reason "divisible"
# a tiny memory cap marks everything OOM: no best
expect_exit sweep_all_oom 0 "$BIGMAC" sweep "$SPEC" --pp 2 --vpp 1 --microbatches 4 --policy bigmac --mem-cap-gib 0.000001
expect_contains sweep_all_oom_row "OOM"
expect_contains sweep_all_oom_best "best: none"
expect_exit sweep_none_valid 1 "$BIGMAC" sweep "$SPEC" --pp 3 --vpp 2 --microbatches 4 --policy none
expect_exit sweep_bad_list 2 "$BIGMAC" sweep "$SPEC" --pp 2,x
expect_exit sweep_bad_policy 2 "$BIGMAC" sweep "$SPEC" --policy all,nope
expect_exit sweep_bad_cap 2 "$BIGMAC" sweep "$SPEC" --mem-cap-gib lots
expect_exit sweep_no_spec 2 "$BIGMAC" sweep --pp 2
# --window multiplies the bigmac rows only: 3 windows x bigmac + 1 optimus = 4 configurations
expect_exit sweep_windows 0 "$BIGMAC" sweep "$SPEC" --pp 4 --vpp 1 --microbatches 16 --policy bigmac,optimus --window 2,3,fit
expect_contains sweep_windows_count "4 configurations"
expect_contains sweep_windows_progress "sweep: [3/4] pp 4 vpp 1 microbatches 16 bigmac window fit"
OUT_TXT=$("$BIGMAC" sweep "$SPEC" --pp 4 --vpp 1 --microbatches 16 --policy bigmac --window 3,4 --json 2>/dev/null)
expect_contains sweep_windows_json_w4 '"window": 4'
expect_contains sweep_windows_json_w3 '"window": 3'
# a window below the smallest deadlock-free one is skipped with the planner's reason
OUT_TXT=$("$BIGMAC" sweep "$SPEC" --pp 4 --vpp 2 --microbatches 16 --policy bigmac --window 1,3 2>/dev/null)
expect_contains sweep_window_too_small "skipped: pp 4 vpp 2 microbatches 16 bigmac window 1"
expect_exit sweep_bad_window 2 "$BIGMAC" sweep "$SPEC" --window 2,zero
expect_exit sweep_window_zero 2 "$BIGMAC" sweep "$SPEC" --window 0

# ---- device.rank_time_scale: every op on rank r takes rank_time_scale[r] x its cost.
# P = 2, M = 1, backbone only, F = 1 / B = 2 per stage, no link latency: 1 + 2 + 4 + 2 = 9 ms
# with rank 1 twice as slow (6 ms at scale 1); the scale survives the JSON table and the CSV.
RS=$(mktemp -d)
cat >"$RS/rs.json" <<'JSON'
{"format": "bigmac-spec", "version": 1, "name": "rs",
 "device": {"link_latency_us": 0, "rank_time_scale": [1, 2]},
 "parallel": {"pp": 2, "microbatches": 1},
 "schedule": {"backbone": "1f1b", "policy": "none"},
 "inputs": ["text"],
 "modules": [{"name": "llm", "consumes": ["text"], "produces": ["h"], "cost": {"fwd_ms": 2, "bwd_ms": 4, "out_mib": 0}}]}
JSON
expect_exit rank_scale_sim 0 "$BIGMAC" simulate "$RS/rs.json"
expect_contains rank_scale_makespan "makespan 9.000 ms"
sed 's/"rank_time_scale": \[1, 2\]/"rank_time_scale": [1, 1]/' "$RS/rs.json" >"$RS/rs1.json"
expect_exit rank_scale_one 0 "$BIGMAC" simulate "$RS/rs1.json"
expect_contains rank_scale_one_makespan "makespan 6.000 ms"
expect_exit rank_scale_table 0 "$BIGMAC" plan "$RS/rs.json" -o "$RS/t.json" --csv "$RS/t.csv"
expect_exit rank_scale_table_sim 0 "$BIGMAC" render "$RS/t.json" --format ascii
expect_contains rank_scale_table_makespan "makespan 9.000 ms"
expect_exit rank_scale_csv 0 "$BIGMAC" plan --from-csv "$RS/t.csv" -o "$RS/t2.json"
expect_exit rank_scale_csv_sim 0 "$BIGMAC" render "$RS/t2.json" --format ascii
expect_contains rank_scale_csv_makespan "makespan 9.000 ms"
expect_exit rank_scale_wrong_pp 1 "$BIGMAC" simulate "$RS/rs.json" --pp 4 --microbatches 4
expect_contains rank_scale_wrong_pp_says "device.rank_time_scale has 2 entries, one per pipeline rank, but pp is 4"
sed 's/"rank_time_scale": \[1, 2\]/"rank_time_scale": [1, 0]/' "$RS/rs.json" >"$RS/rs0.json"
expect_exit rank_scale_zero 1 "$BIGMAC" simulate "$RS/rs0.json"
expect_contains rank_scale_zero_says "rs0.json:2:58: device.rank_time_scale[1] must be a number in (0, 1000], got 0"
sed 's/"rank_time_scale": \[1, 2\]/"rank_time_scale": 2/' "$RS/rs.json" >"$RS/rsn.json"
expect_exit rank_scale_not_array 1 "$BIGMAC" simulate "$RS/rsn.json"
expect_contains rank_scale_not_array_says "device.rank_time_scale must be a non-empty array of numbers"
rm -rf "$RS"

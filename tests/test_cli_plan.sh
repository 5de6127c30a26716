#!/usr/bin/env bash
# bigmac plan: flags, outputs, and every bad-spec case from issue #2 giving a positioned
# message ("file:line:col: ...") and a non-zero exit.
source "$(dirname "$0")/lib.sh"
D=$TEST_TMP/plan
mkdir -p "$D"

base() { # base SPEC_FRAGMENT_FOR_PARALLEL MODULES -> a spec on stdout
    cat <<JSON
{"format": "bigmac-spec", "version": 1, "name": "t",
 "parallel": {$1},
 "inputs": ["image", "text"],
 "modules": [
$2
 ]}
JSON
}
VIT='  {"name": "vit", "consumes": ["image"], "produces": ["emb"]},'
LLM='  {"name": "llm", "role": "backbone", "consumes": ["text", "emb"], "produces": ["hidden"], "cost": {"fwd_ms": 8, "bwd_ms": 16}}'

base '"pp": 4, "microbatches": 8' "$VIT
$LLM" >"$D/ok.json"
expect_exit plan_ok 0 "$BIGMAC" plan "$D/ok.json" -o "$D/t.json"
expect_contains plan_summary_policy "policy bigmac, backbone 1f1b, P=4 V=1 M=8 U=4 W=2"
expect_contains plan_summary_live "peak live microbatches per rank"
expect_contains plan_summary_makespan "nominal makespan"
expect_exit plan_output_verifies 0 "$BIGMAC" verify "$D/t.json"
expect_exit plan_flags_override 0 "$BIGMAC" plan "$D/ok.json" --pp 2 --vpp 2 --backbone interleaved --microbatches 6 --policy optimus
expect_contains plan_flags_override_text "policy optimus, backbone interleaved, P=2 V=2 M=6"
expect_exit plan_stdout_table 0 "$BIGMAC" plan "$D/ok.json" -o -
expect_contains plan_stdout_table_json '"format": "bigmac-table"'
for pol in bigmac optimus unified unified-balanced ideal none; do
    expect_exit "plan_policy_$pol" 0 "$BIGMAC" plan "$D/ok.json" --policy "$pol" -o "$D/$pol.json"
    expect_exit "verify_policy_$pol" 0 "$BIGMAC" verify "$D/$pol.json"
done
expect_exit plan_window_too_small 1 "$BIGMAC" plan "$D/ok.json" --window 1 --microbatches 16
expect_contains plan_window_too_small_text "window W=1 is too small"
expect_contains plan_window_too_small_blocked "rank 0 blocked at 0F4"
expect_contains plan_window_too_small_hint "smallest safe window here is 2"

# usage errors: exit 2
expect_exit usage_no_spec 2 "$BIGMAC" plan
expect_exit usage_bad_pp 2 "$BIGMAC" plan "$D/ok.json" --pp zero
expect_contains usage_bad_pp_text "--pp: expected a positive integer, got 'zero'"
expect_exit usage_bad_policy 2 "$BIGMAC" plan "$D/ok.json" --policy fastest
expect_contains usage_bad_policy_text "unknown policy 'fastest'"
expect_exit usage_unknown_flag 2 "$BIGMAC" plan "$D/ok.json" --turbo
expect_exit usage_unknown_command 2 "$BIGMAC" planx
expect_exit flag_interleaved_m 1 "$BIGMAC" plan "$D/ok.json" --backbone interleaved --vpp 2 --microbatches 6
expect_contains flag_interleaved_m_text "divisible by pp"

# bad specs: positioned messages, exit 1
bad() { # NAME EXPECTED_POSITION_AND_TEXT
    local name=$1 want=$2
    expect_exit "bad_$name" 1 "$BIGMAC" plan "$D/$name.json"
    expect_contains "bad_${name}_message" "$D/$name.json:$want"
}
printf '{"format": "bigmac-spec", "version": 1,\n "modules": [\n' >"$D/syntax.json"
bad syntax "3:"
base '"pp": 4, "microbatchs": 8' "$VIT
$LLM" >"$D/typo.json"
bad typo '2:24: unknown key "microbatchs" in "parallel"'
expect_contains bad_typo_hint 'did you mean "microbatches"'
base '"pp": 4' '  {"name": "vit", "consumes": ["image"], "produces": ["emb"]},
  {"name": "llm", "role": "backbone", "consumes": ["text", "emb", "audio_emb"], "produces": ["hidden"]}' >"$D/missing.json"
bad missing '6:67: module "llm" consumes "audio_emb"'
base '"pp": 4' '  {"name": "a", "consumes": ["image", "c_out"], "produces": ["a_out"]},
  {"name": "b", "consumes": ["a_out"], "produces": ["b_out"]},
  {"name": "c", "consumes": ["b_out"], "produces": ["c_out"]},
  {"name": "llm", "role": "backbone", "consumes": ["text", "c_out"], "produces": ["hidden"]}' >"$D/cycle.json"
bad cycle '5:39: cycle in the module graph'
expect_contains bad_cycle_names 'a -> b -> c -> a'
base '"pp": 4' '  {"name": "vit", "consumes": ["image"], "produces": ["emb"]},
  {"name": "llm", "role": "backbone", "consumes": ["text", "emb"], "produces": ["hidden"]},
  {"name": "llm2", "role": "backbone", "consumes": ["hidden"], "produces": ["h2"]}' >"$D/two_backbones.json"
bad two_backbones '7:20: several backbones'
expect_contains bad_two_backbones_text 'backbone'
base '"pp": 4' '  {"name": "vit", "role": "encoder", "consumes": ["image"], "produces": ["emb"]},
  {"name": "llm", "role": "encoder", "consumes": ["text", "emb"], "produces": ["hidden"]}' >"$D/no_backbone.json"
bad no_backbone ''
expect_contains bad_no_backbone_text 'backbone'
base '"pp": 0' "$VIT
$LLM" >"$D/nonpositive.json"
bad nonpositive '2:15: parallel.pp must be an integer >= 1, got 0'
base '"pp": 4, "microbatches": 10, "vpp": 2' "$VIT
$LLM" | sed 's/"parallel"/"schedule": {"backbone": "interleaved"}, "parallel"/' >"$D/interleaved_m.json"
bad interleaved_m '2:65: parallel.microbatches (10)'
expect_contains bad_interleaved_m_text 'multiple of parallel.pp'
expect_exit bad_missing_file 1 "$BIGMAC" plan "$D/nope.json"
expect_contains bad_missing_file_text "$D/nope.json: cannot open"
expect_exit plan_window_fit 0 "$BIGMAC" plan "$D/ok.json" --window fit --microbatches 32
# a window is a cap: on interleaved understanding (placement search on) W = 7 is no faster than
# 6, so the plan says it used 6 (before the search, W = 5..8 were no faster than 4)
U=examples/understanding-qwen3-30b-a3b.json
expect_exit plan_window_cap 0 "$BIGMAC" plan "$U" --window 7
expect_contains plan_window_cap_text "W=6 (under the cap W=7, none faster by more than 0.05%)"
expect_exit simulate_window_cap 0 "$BIGMAC" simulate "$U" --window 7
expect_contains simulate_window_cap_text "window 6 (under the cap 7, none faster by more than 0.05%)"
expect_exit plan_window_cap_reached 0 "$BIGMAC" plan "$U" --window 6 --backbone 1f1b --vpp 1
expect_contains plan_window_cap_reached_text "P=8 V=1 M=64 U=8 W=6"
if printf '%s' "$OUT_TXT" | grep -q "under the cap"; then echo "FAIL plan_window_cap_reached_no_note"; else
    echo "PASS plan_window_cap_reached_no_note"; fi

# a spec that writes out unit = pp keeps following pp under --pp (unless --unit is given)
sed 's/"pp": 4, "microbatches": 8/"pp": 4, "unit": 4, "microbatches": 8/' "$D/ok.json" >"$D/unit_pp.json"
expect_exit plan_unit_follows_pp 0 "$BIGMAC" plan "$D/unit_pp.json" --pp 8 --microbatches 16
expect_contains plan_unit_follows_pp_text "P=8 V=1 M=16 U=8"
expect_exit plan_unit_flag_wins 0 "$BIGMAC" plan "$D/unit_pp.json" --pp 8 --microbatches 16 --unit 4
expect_contains plan_unit_flag_wins_text "P=8 V=1 M=16 U=4"

# zero-bubble backbones: plan, verify, simulate (the two-step free), CSV with PyTorch's I/W
T2=examples/tiny-mllm.json
expect_exit plan_zb_h1 0 "$BIGMAC" plan $T2 --backbone zb-h1 --vpp 1 -o "$D/zb.json" --csv "$D/zb.csv"
expect_exit verify_zb_h1 0 "$BIGMAC" verify "$D/zb.json"
if grep -q ',0I0' "$D/zb.csv" && grep -q ',0W0' "$D/zb.csv" && grep -q 'w_ms=' "$D/zb.csv"; then
    echo "PASS plan_zb_h1_csv_has_i_and_w"; else echo "FAIL plan_zb_h1_csv_has_i_and_w"; fi
expect_exit plan_zb_from_csv 0 "$BIGMAC" plan --from-csv "$D/zb.csv" -o "$D/zb2.json"
if cmp -s "$D/zb.json" "$D/zb2.json"; then echo "PASS plan_zb_csv_round_trip"; else echo "FAIL plan_zb_csv_round_trip"; fi
expect_exit simulate_zb_interleaved 0 "$BIGMAC" simulate $T2 --backbone zb-interleaved --json
expect_contains simulate_zb_reports_both_frees '"freed_at_w_gib"'
expect_exit plan_zb_interleaved_vpp1 1 "$BIGMAC" plan $T2 --backbone zb-interleaved --vpp 1
expect_contains plan_zb_interleaved_vpp1_text "zb-interleaved needs vpp >= 2 (got 1)"
expect_exit plan_1f1b_table_unchanged 0 "$BIGMAC" plan $T2 --backbone 1f1b --vpp 1 -o "$D/f.json"
if grep -q '"w_ms"\|"W"' "$D/f.json"; then echo "FAIL plan_1f1b_table_has_no_split"; else echo "PASS plan_1f1b_table_has_no_split"; fi

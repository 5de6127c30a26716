#!/usr/bin/env bash
# PyTorch's schedule files (docs/csv.md "PyTorch's files", issue 25): the three artifacts of
# PyTorch's own tests load (compute-only ones lowered by the planner's lowering, the comms one as
# written) and verify; a compute-only 1F1B gives the planned table's makespan (and the
# hand-computed one with free links); errors name the cell; render --format torch-csv round-trips.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
T=$TEST_TMP
ART=../shared/data/torch
[ -d "$ART" ] || ART=/work/shared/data/torch

# the artifacts load and verify
for f in zb1p_2rank_2stagep_compute zb1p_2rank_2stagep_comms; do
    expect_exit "torch_csv_load_$f" 0 $BIGMAC plan --from-csv "$ART/$f.csv" -o "$T/$f.json"
    expect_contains "torch_csv_load_${f}_shape" "policy none, backbone zb-interleaved, P=2 V=2 M=8"
    expect_exit "torch_csv_verify_$f" 0 $BIGMAC verify "$T/$f.json"
done
expect_exit torch_csv_compute_is_lowered 0 $BIGMAC plan --from-csv "$ART/zb1p_2rank_2stagep_compute.csv"
expect_contains torch_csv_compute_is_lowered_says_so "compute ops only: added the sends and receives"
expect_contains torch_csv_compute_lowered_ops "ops: 192 (96 compute, 48 send, 48 recv)"
expect_exit torch_csv_comms_as_written 0 $BIGMAC plan --from-csv "$ART/zb1p_2rank_2stagep_comms.csv"
if printf '%s' "$OUT_TXT" | grep -q "compute ops only"; then echo "FAIL torch_csv_comms_not_relowered"; else echo "PASS torch_csv_comms_not_relowered"; fi

# a compute-only 1F1B, P = 4, M = 8 (the design's golden order, PyTorch cells)
cat >"$T/1f1b.csv" <<'CSV'
0F0,0F1,0F2,0F3,0B0,0F4,0B1,0F5,0B2,0F6,0B3,0F7,0B4,0B5,0B6,0B7
1F0,1F1,1F2,1B0,1F3,1B1,1F4,1B2,1F5,1B3,1F6,1B4,1F7,1B5,1B6,1B7
2F0,2F1,2B0,2F2,2B1,2F3,2B2,2F4,2B3,2F5,2B4,2F6,2B5,2F7,2B6,2B7
3F0,3B0,3F1,3B1,3F2,3B2,3F3,3B3,3F4,3B4,3F5,3B5,3F6,3B6,3F7,3B7
CSV
# loaded with the spec: byte-identical to the table bigmac plans for the same backbone
$BIGMAC plan examples/tiny-mllm.json --policy none --pp 4 --vpp 1 --microbatches 8 --backbone 1f1b -o "$T/planned.json" >"$T/planned.txt"
expect_exit torch_csv_1f1b_load 0 $BIGMAC plan --from-csv "$T/1f1b.csv" examples/tiny-mllm.json -o "$T/loaded.json"
if cmp -s "$T/loaded.json" "$T/planned.json"; then echo "PASS torch_csv_1f1b_equals_planned_table"; else echo "FAIL torch_csv_1f1b_equals_planned_table"; fi
mk=$(grep -o 'nominal makespan [0-9.]* ms, bubble ratio [0-9.]*' "$T/planned.txt")
expect_contains torch_csv_1f1b_makespan_is_planned "$mk"
expect_contains torch_csv_1f1b_makespan_value "nominal makespan 66.656 ms, bubble ratio 0.280"
# with free links the makespan is (M + P - 1)(F + B) = 11 * (2 + 4) = 66 ms and the bubble
# 1 - 8 * 6 / 66 = 0.273 (by hand: F = 8 ms / 4 chunks, B = 16 ms / 4)
sed 's/"link_gbytes_per_s": 5, "link_latency_us": 20/"link_gbytes_per_s": 1e9, "link_latency_us": 0/' examples/tiny-mllm.json >"$T/free.json"
expect_exit torch_csv_1f1b_free_links 0 $BIGMAC plan --from-csv "$T/1f1b.csv" "$T/free.json"
expect_contains torch_csv_1f1b_free_links_66ms "nominal makespan 66.000 ms, bubble ratio 0.273"
# without the spec: unit costs (F = 1, B = 2 per stage): (8 + 3) * 3 = 33
expect_exit torch_csv_1f1b_no_spec 0 $BIGMAC plan --from-csv "$T/1f1b.csv"
expect_contains torch_csv_1f1b_no_spec_unit_steps "nominal makespan 33."
expect_exit torch_csv_render_lowers 0 $BIGMAC render "$T/1f1b.csv" --format ascii --width 80
# a bigmac CSV without its send/recv cells is lowered as well: the same table back
$BIGMAC plan examples/tiny-mllm.json --pp 2 --vpp 1 --backbone 1f1b --microbatches 4 --csv "$T/b.csv" -o "$T/b.json" >/dev/null
sed -E 's/(^|,)(SEND|RECV)_[^,]*//g; s/^,//' "$T/b.csv" >"$T/b_compute.csv"
expect_exit torch_csv_bigmac_compute_only 0 $BIGMAC plan --from-csv "$T/b_compute.csv" -o "$T/b2.json"
if cmp -s "$T/b.json" "$T/b2.json"; then echo "PASS torch_csv_bigmac_compute_only_equals_plan"; else echo "FAIL torch_csv_bigmac_compute_only_equals_plan"; fi

# errors name the cell
printf '0F0,vit:F0\n1F0,0SEND_F0\n' >"$T/mix.csv"
expect_exit torch_csv_mixed_refused 1 $BIGMAC plan --from-csv "$T/mix.csv" examples/tiny-mllm.json
expect_contains torch_csv_mixed_names_both 'cell "0SEND_F0" is written in PyTorch'"'"'s grammar, but cell "vit:F0" (line 1, column 5)'
printf '0UNSHARD,0F0,0B0\n1F0,1B0\n' >"$T/unshard.csv"
expect_exit torch_csv_unshard_refused 1 $BIGMAC plan --from-csv "$T/unshard.csv"
expect_contains torch_csv_unshard_names_cell 'unshard.csv:1:1: cell "0UNSHARD": UNSHARD is FSDP'
printf '0F0,0REDUCE_GRAD\n1F0\n' >"$T/rg.csv"
expect_exit torch_csv_reduce_grad_refused 1 $BIGMAC plan --from-csv "$T/rg.csv"
expect_contains torch_csv_reduce_grad_names_cell 'cell "0REDUCE_GRAD": REDUCE_GRAD is'
printf '0F0,1SEND_F0,2F0\n1F0,3F0\n' >"$T/wr.csv"
expect_exit torch_csv_comm_wrong_row 1 $BIGMAC plan --from-csv "$T/wr.csv"
expect_contains torch_csv_comm_wrong_row_msg 'stage 1 is in rank 0'"'"'s row, but it runs on rank 1 (a stage runs on one rank: the row of its first compute cell) in cell "1SEND_F0"'
printf '0F0,(0F1;1B0)OVERLAP_F_B\n1F0\n' >"$T/ov.csv"
expect_exit torch_csv_overlap_wrong_rank 1 $BIGMAC plan --from-csv "$T/ov.csv"
expect_contains torch_csv_overlap_wrong_rank_msg 'ov.csv:2:1: stage 1 is in rank 1'"'"'s row, but it runs on rank 0'
printf '(0F0;0B0)OVERLAP_X\n1F0,1B0\n' >"$T/ov2.csv"
expect_exit torch_csv_overlap_bad_kind 1 $BIGMAC plan --from-csv "$T/ov2.csv"
expect_contains torch_csv_overlap_bad_kind_msg "(<action>;<action>)OVERLAP_F_B"
printf '0F0,0B0\n1F0\n' >"$T/missing.csv"
expect_exit torch_csv_compute_only_missing_op 1 $BIGMAC plan --from-csv "$T/missing.csv"
expect_contains torch_csv_compute_only_missing_op_msg "cannot add sends and receives: 1B0 is in no row"
printf '0F0,0B0,0F0\n1F0,1B0\n' >"$T/dup.csv"
expect_exit torch_csv_compute_only_dup_op 1 $BIGMAC plan --from-csv "$T/dup.csv"
expect_contains torch_csv_compute_only_dup_op_msg "0F0 appears a second time"
expect_exit torch_csv_policy_refused 1 $BIGMAC plan --from-csv "$T/1f1b.csv" --policy bigmac
expect_contains torch_csv_policy_refused_msg "holds backbone work only"

# OVERLAP_F_B: both halves back to back, costed as the two ops (unit costs: F 1 + B 2)
printf '0F0,0F1,0B0,0B1\n1F0,(1F1;1B0)OVERLAP_F_B,1B1\n' >"$T/ovl.csv"
expect_exit torch_csv_overlap_loads 0 $BIGMAC plan --from-csv "$T/ovl.csv" -o "$T/ovl.json"
expect_exit torch_csv_overlap_verifies 0 $BIGMAC verify "$T/ovl.json"
printf '0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n' >"$T/flat.csv"
$BIGMAC plan --from-csv "$T/flat.csv" -o "$T/flat.json" >/dev/null
if cmp -s "$T/ovl.json" "$T/flat.json"; then echo "PASS torch_csv_overlap_is_back_to_back"; else echo "FAIL torch_csv_overlap_is_back_to_back"; fi

# render --format torch-csv: the artifacts come back byte for byte
expect_exit torch_csv_render_compute 0 $BIGMAC render "$ART/zb1p_2rank_2stagep_compute.csv" --format torch-csv -o "$T/rt1.csv"
if cmp -s "$T/rt1.csv" "$ART/zb1p_2rank_2stagep_compute.csv"; then echo "PASS torch_csv_roundtrip_compute_bytes"; else echo "FAIL torch_csv_roundtrip_compute_bytes"; fi
expect_exit torch_csv_render_comms 0 $BIGMAC render "$ART/zb1p_2rank_2stagep_comms.csv" --format torch-csv --comms -o "$T/rt2.csv"
if cmp -s "$T/rt2.csv" "$ART/zb1p_2rank_2stagep_comms.csv"; then echo "PASS torch_csv_roundtrip_comms_bytes"; else echo "FAIL torch_csv_roundtrip_comms_bytes"; fi
expect_exit torch_csv_comms_flag_needs_format 2 $BIGMAC render "$T/1f1b.csv" --format csv --comms
expect_exit torch_csv_left_out_line 0 $BIGMAC render examples/tiny-mllm.json --format torch-csv -o "$T/n.csv"
expect_contains torch_csv_left_out_line_says "bigmac: note: torch-csv: left out"
n=$(printf '%s\n' "$OUT_TXT" | grep -c "note: torch-csv")
if [ "$n" = 1 ]; then echo "PASS torch_csv_left_out_one_line"; else echo "FAIL torch_csv_left_out_one_line: $n"; fi
exit 0

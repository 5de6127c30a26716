#!/usr/bin/env bash
# V-shaped backbones from the command line (issue 25): PyTorch's DualPipeV artifact loads as
# --backbone dualpipe-v (the same table byte for byte, verified, written back byte for byte);
# zb-v and dualpipe-v plan, verify, simulate and render with every policy; `bigmac train` under
# mpirun equals `train --reference` within 1e-4 (losses and parameters).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
T=$TEST_TMP
ART=../shared/data/torch
[ -d "$ART" ] || ART=/work/shared/data/torch
SPEC=examples/tiny-mllm.json

expect_exit vshape_dualpipev_loads 0 $BIGMAC plan --from-csv "$ART/dualpipev_4rank_10mb.csv" $SPEC -o "$T/dp.json"
expect_contains vshape_dualpipev_is_dualpipe_v "policy none, backbone dualpipe-v, P=4 V=2 M=10"
expect_exit vshape_dualpipev_verifies 0 $BIGMAC verify "$T/dp.json"
$BIGMAC plan $SPEC --policy none --pp 4 --vpp 2 --microbatches 10 --backbone dualpipe-v -o "$T/planned.json" >/dev/null
if cmp -s "$T/dp.json" "$T/planned.json"; then echo "PASS vshape_dualpipev_equals_backbone_dualpipe_v"; else echo "FAIL vshape_dualpipev_equals_backbone_dualpipe_v"; fi
if grep -q '"chunk_rank": \[0, 1, 2, 3, 3, 2, 1, 0\]' "$T/dp.json"; then echo "PASS vshape_table_has_chunk_rank"; else echo "FAIL vshape_table_has_chunk_rank"; fi
expect_exit vshape_dualpipev_render 0 $BIGMAC render "$ART/dualpipev_4rank_10mb.csv" --format torch-csv -o "$T/rt.csv"
if cmp -s "$T/rt.csv" "$ART/dualpipev_4rank_10mb.csv"; then echo "PASS vshape_dualpipev_roundtrip_bytes"; else echo "FAIL vshape_dualpipev_roundtrip_bytes"; fi
expect_exit vshape_dualpipev_render_table 0 $BIGMAC render "$T/planned.json" --format torch-csv -o "$T/rt2.csv"
if cmp -s "$T/rt2.csv" "$ART/dualpipev_4rank_10mb.csv"; then echo "PASS vshape_planned_dualpipe_v_is_pytorch_file"; else echo "FAIL vshape_planned_dualpipe_v_is_pytorch_file"; fi
# bigmac's own CSV carries the map and reloads to the same table
expect_exit vshape_csv_write 0 $BIGMAC plan $SPEC --pp 4 --vpp 2 --microbatches 8 --backbone zb-v --policy optimus --csv "$T/v.csv" -o "$T/v.json"
if grep -q '^# chunk_rank 0 1 2 3 3 2 1 0$' "$T/v.csv"; then echo "PASS vshape_csv_has_chunk_rank"; else echo "FAIL vshape_csv_has_chunk_rank"; fi
$BIGMAC plan --from-csv "$T/v.csv" -o "$T/v2.json" >/dev/null
if cmp -s "$T/v.json" "$T/v2.json"; then echo "PASS vshape_csv_roundtrip"; else echo "FAIL vshape_csv_roundtrip"; fi

# every policy plans, verifies, simulates and renders over both
for bb in zb-v dualpipe-v; do
    for pol in bigmac optimus unified unified-balanced ideal none; do
        n=${bb}_$pol
        if $BIGMAC plan $SPEC --pp 4 --vpp 2 --microbatches 16 --backbone $bb --policy $pol -o "$T/$n.json" >/dev/null 2>"$T/$n.err" &&
           $BIGMAC verify "$T/$n.json" >/dev/null && $BIGMAC simulate $SPEC --table "$T/$n.json" >/dev/null &&
           $BIGMAC render "$T/$n.json" --format html -o "$T/$n.html" 2>/dev/null &&
           $BIGMAC render "$T/$n.json" --format ascii >/dev/null; then
            echo "PASS vshape_plan_verify_render_$n"
        else
            echo "FAIL vshape_plan_verify_render_$n"; sed 's/^/    /' "$T/$n.err" | head -5
        fi
    done
done
# the policy comparison with its lower bound (every policy planned, none under the bound)
for bb in zb-v dualpipe-v; do
    expect_exit vshape_compare_$bb 0 $BIGMAC simulate $SPEC --pp 4 --vpp 2 --microbatches 16 --backbone $bb --compare
    expect_contains vshape_compare_${bb}_bound "lower bound"
done
expect_exit vshape_wrong_vpp 1 $BIGMAC plan $SPEC --pp 4 --vpp 3 --backbone zb-v
expect_contains vshape_wrong_vpp_says "zb-v places two chunks per rank in a V: vpp must be 2"
expect_exit vshape_dualpipe_needs_2p 1 $BIGMAC plan $SPEC --pp 4 --vpp 2 --microbatches 6 --backbone dualpipe-v
expect_contains vshape_dualpipe_needs_2p_says "dualpipe-v needs at least 2*pp = 8 microbatches"

# bigmac train under mpirun equals the reference
if ! command -v mpirun >/dev/null; then echo "FAIL vshape_mpirun_missing"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# MPI libraries leak by design at exit (as tests/test_exec_mpi.sh); ASan builds check everything else
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
STEPS=3
"$BIGMAC" train $SPEC --reference --steps $STEPS --log "$T/ref.log" --dump-params "$T/ref.bin" >/dev/null 2>&1 || echo "FAIL vshape_reference_run"
for cfg in "2 zb-v bigmac" "4 dualpipe-v optimus" "4 zb-v unified"; do
    set -- $cfg
    n=mpi_p$1_$2_$3
    if timeout 120 mpirun --oversubscribe -np "$1" "$BIGMAC" train $SPEC --pp "$1" --vpp 2 --backbone "$2" --policy "$3" \
        --steps $STEPS --quiet --log "$T/$n.log" --dump-params "$T/$n.bin" >"$T/$n.out" 2>&1; then
        losses_match "vshape_losses_${n}_match_reference" "$T/$n.log" "$T/ref.log"
        params_match "vshape_params_${n}_match_reference" "$T/$n.bin" "$T/ref.bin"
    else
        echo "FAIL vshape_run_$n"; tail -5 "$T/$n.out" | sed 's/^/    /'
    fi
done
exit 0

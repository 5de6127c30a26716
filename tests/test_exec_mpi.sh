#!/usr/bin/env bash
# test_exec_mpi.sh — the pipelined executor under mpirun against the single-process reference:
# for every policy (bigmac, optimus, unified) x backbone (1f1b, interleaved, zb-h1,
# zb-interleaved) x P (2, 4), the
# per-step losses and the final parameters match `train --reference` within 1e-4 relative; the
# same with two encoders (bigmac, optimus at P = 2; bigmac interleaved at P = 4).
# Also: --trace renders, failure handling (NaN, crash, exit, hang: every rank exits non-zero
# within seconds, naming the rank and op), checkpoint + resume == uninterrupted run, --table.
# Every MPI run is wrapped in `timeout` so a bug is a failure, not a hang.
# suite: waits (tests/run.sh runs it in the lane beside the others: its time is spent waiting)
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
SPEC=examples/tiny-mllm.json
STEPS=3
T=$TEST_TMP/exec_mpi
mkdir -p "$T"

# --local needs no MPI: the same op lists in one process, traced and calibrated.
expect_exit local_trace 0 "$BIGMAC" train $SPEC --local --steps 1 --quiet --trace "$T/local.json"
expect_exit local_trace_renders 0 "$BIGMAC" render "$T/local.json" --format ascii
expect_contains local_trace_is_measured "measured timeline"
expect_exit calibrate_fragment 0 "$BIGMAC" calibrate "$T/local.json" -o "$T/costs.json"
if grep -q '"format": "bigmac-costs"' "$T/costs.json" && [ "$(grep -c '"fwd_ms"' "$T/costs.json")" = 3 ]; then
    echo "PASS calibrate_fragment_has_three_modules"; else echo "FAIL calibrate_fragment_has_three_modules"; fi
expect_exit calibrate_spec 0 "$BIGMAC" calibrate "$T/local.json" --spec $SPEC -o "$T/calibrated.json"
expect_exit calibrated_spec_simulates 0 "$BIGMAC" simulate "$T/calibrated.json"
expect_exit calibrate_refuses_simulated_trace 1 "$BIGMAC" calibrate <("$BIGMAC" render $SPEC --format trace 2>/dev/null)
expect_contains calibrate_refuses_simulated_trace_message "a simulated trace"
# several runs of one plan are pooled; a run of another plan is refused by name
expect_exit local_trace_again 0 "$BIGMAC" train $SPEC --local --steps 1 --quiet --trace "$T/local2.json"
expect_exit calibrate_pools_runs 0 "$BIGMAC" calibrate "$T/local.json" "$T/local2.json" -o "$T/costs2.json"
if [ "$(grep -c 'local2\?\.json"' "$T/costs2.json")" = 3 ]; then
    echo "PASS calibrate_pooled_names_its_traces"; else echo "FAIL calibrate_pooled_names_its_traces"; fi
expect_exit local_trace_other_plan 0 "$BIGMAC" train $SPEC --local --steps 1 --quiet --policy optimus --trace "$T/local_opt.json"
expect_exit calibrate_refuses_other_plan 1 "$BIGMAC" calibrate "$T/local.json" "$T/local_opt.json"
expect_contains calibrate_refuses_other_plan_message "local_opt.json: not a run of the same plan"
# --rank-scale: one measured multiplier per rank, in the fragment and as device.rank_time_scale
expect_exit calibrate_rank_scale 0 "$BIGMAC" calibrate "$T/local.json" --mean --rank-scale
expect_contains calibrate_rank_scale_key '"rank_time_scale": ['
expect_exit calibrate_rank_scale_spec 0 "$BIGMAC" calibrate "$T/local.json" --mean --rank-scale --spec $SPEC -o "$T/ranks.json"
if [ "$(tr -d ' \n' <"$T/ranks.json" | grep -o '"rank_time_scale":\[[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*,[0-9.e+-]*\]' | wc -l)" = 1 ]; then
    echo "PASS calibrate_rank_scale_one_per_rank"; else echo "FAIL calibrate_rank_scale_one_per_rank"; fi
expect_exit calibrated_rank_scale_simulates 0 "$BIGMAC" simulate "$T/ranks.json"
expect_exit calibrated_rank_scale_other_pp 1 "$BIGMAC" simulate "$T/ranks.json" --pp 2
expect_contains calibrated_rank_scale_other_pp_says "has 4 entries, one per pipeline rank, but pp is 2"

# Encoders that read different images cannot share a batch: a clear error naming the module and
# field, from the pipelined trainer and the reference alike.
sed 's/"image": 16, "patch": 8/"image": 8, "patch": 8/' examples/tiny-mllm-2enc.json >"$T/2enc_bad.json"
expect_exit two_encoders_image_mismatch_local 1 "$BIGMAC" train "$T/2enc_bad.json" --local --steps 1
expect_contains two_encoders_image_mismatch_message 'module "vit_coarse": arch.image 8 disagrees with encoder "vit_fine" (image 16)'
expect_exit two_encoders_image_mismatch_reference 1 "$BIGMAC" train "$T/2enc_bad.json" --reference --steps 1
expect_contains two_encoders_image_mismatch_reference_message 'module "vit_coarse": arch.image 8'

if ! command -v mpirun >/dev/null; then
    echo "SKIP exec_mpi: no mpirun (make deps installs openmpi-bin)"
    exit 0
fi

mpi() { # mpi NP ARGS... : bigmac under mpirun, 60 s at most
    local np=$1; shift
    timeout 60 mpirun --oversubscribe -np "$np" "$BIGMAC" "$@"
}

# losses_match and params_match: tests/lib.sh

# matches_reference NAME SPEC REF P V BACKBONE POLICY : SPEC pipelined over P ranks matches the
# reference run whose log and parameters are REF.log and REF.bin
matches_reference() {
    local n=$1 spec=$2 ref=$3
    if mpi "$4" train "$spec" --pp "$4" --vpp "$5" --backbone "$6" --policy "$7" --steps $STEPS --quiet \
           --log "$T/$n.log" --dump-params "$T/$n.bin" >"$T/$n.out" 2>&1; then
        losses_match "losses_${n}_match_reference" "$T/$n.log" "$ref.log"
        params_match "params_${n}_match_reference" "$T/$n.bin" "$ref.bin"
    else
        echo "FAIL run_$n"; sed 's/^/    /' "$T/$n.out" | tail -5
    fi
}

"$BIGMAC" train $SPEC --reference --steps $STEPS --log "$T/ref.log" --dump-params "$T/ref.bin" >/dev/null 2>&1 ||
    echo "FAIL reference_run"

for P in 2 4; do
    for bb in 1f1b interleaved zb-h1 zb-interleaved; do # zb-*: the backbone's backward split (B, W)
        V=1; case $bb in *interleaved) V=2 ;; esac
        for pol in bigmac optimus unified; do
            matches_reference "p${P}_${bb}_${pol}" $SPEC "$T/ref" $P $V $bb $pol
        done
    done
done

# A generator whose loss does not train the backbone (no grad:hidden travels).
sed 's/"grad_to_backbone": true/"grad_to_backbone": false/' $SPEC >"$T/nog2b.json"
"$BIGMAC" train "$T/nog2b.json" --reference --steps 2 --log "$T/nog2b_ref.log" --dump-params "$T/nog2b_ref.bin" >/dev/null 2>&1
if mpi 2 train "$T/nog2b.json" --steps 2 --quiet --log "$T/nog2b.log" --dump-params "$T/nog2b.bin" >"$T/nog2b.out" 2>&1; then
    losses_match losses_no_grad_to_backbone_match_reference "$T/nog2b.log" "$T/nog2b_ref.log"
    params_match params_no_grad_to_backbone_match_reference "$T/nog2b.bin" "$T/nog2b_ref.bin"
else
    echo "FAIL run_no_grad_to_backbone"; tail -5 "$T/nog2b.out" | sed 's/^/    /'
fi

# Two encoders (examples/tiny-mllm-2enc.json: two ViT towers at patch 4 and 8): chunk 0 takes both
# towers' outputs, each rank a replica of each tower.
SPEC2=examples/tiny-mllm-2enc.json
"$BIGMAC" train $SPEC2 --reference --steps $STEPS --log "$T/2enc_ref.log" --dump-params "$T/2enc_ref.bin" >/dev/null 2>&1 ||
    echo "FAIL reference_run_two_encoders"
matches_reference 2enc_p2_1f1b_bigmac $SPEC2 "$T/2enc_ref" 2 1 1f1b bigmac
matches_reference 2enc_p2_1f1b_optimus $SPEC2 "$T/2enc_ref" 2 1 1f1b optimus
matches_reference 2enc_p4_interleaved_bigmac $SPEC2 "$T/2enc_ref" 4 2 interleaved bigmac

# Three generators (tests/specs/exec-2gen.json): two send a gradient into the backbone, one per
# generator, which the last chunk's backward sums; the third sends none.
SPEC3=tests/specs/exec-2gen.json
"$BIGMAC" train $SPEC3 --reference --steps $STEPS --log "$T/3gen_ref.log" --dump-params "$T/3gen_ref.bin" >/dev/null 2>&1 ||
    echo "FAIL reference_run_three_generators"
matches_reference 3gen_p2_1f1b_bigmac $SPEC3 "$T/3gen_ref" 2 1 1f1b bigmac
matches_reference 3gen_p2_interleaved_optimus $SPEC3 "$T/3gen_ref" 2 2 interleaved optimus

# The log has one line per step with a peak per rank and role.
if [ "$(grep -c '"peak_act_bytes": {"encoder": [0-9]*, "backbone": [0-9]*, "generator": [0-9]*}' "$T/p4_1f1b_bigmac.log")" = $STEPS ] &&
   [ "$(grep -o '"rank": ' "$T/p4_1f1b_bigmac.log" | wc -l)" = $((STEPS * 4)) ]; then
    echo "PASS log_has_peak_bytes_per_rank_and_role"; else echo "FAIL log_has_peak_bytes_per_rank_and_role"; fi

# --trace: a Chrome trace of the last step that render reads back.
expect_exit trace_written 0 mpi 4 train $SPEC --steps 1 --quiet --trace "$T/trace.json"
expect_exit trace_renders 0 "$BIGMAC" render "$T/trace.json" --format ascii
expect_contains trace_is_measured "measured timeline"

# --table: run a saved table; its pp must equal the number of ranks.
"$BIGMAC" plan $SPEC --pp 2 --vpp 1 --backbone 1f1b --policy optimus -o "$T/table.json" >/dev/null
expect_exit table_runs 0 mpi 2 train $SPEC --table "$T/table.json" --steps 2 --quiet --log "$T/table.log"
expect_exit table_pp_checked 1 mpi 4 train $SPEC --table "$T/table.json" --steps 1 --quiet
expect_contains table_pp_message "the table has pp 2 but 4 ranks run it"

# Failure handling: every rank exits non-zero within seconds, the message names rank and op.
fault() { # fault NAME KIND PATTERN
    local t0=$(date +%s)
    OUT_TXT=$(timeout 30 mpirun --oversubscribe -np 4 "$BIGMAC" train $SPEC --steps 2 --quiet --timeout 10 \
              --inject-fault "2:$2" 2>&1)
    local rc=$? dt=$(( $(date +%s) - t0 ))
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -le 25 ]; then echo "PASS fault_${1}_exits_nonzero"; else
        echo "FAIL fault_${1}_exits_nonzero: exit $rc after ${dt}s"; echo "$OUT_TXT" | head -10 | sed 's/^/    /'; fi
    expect_contains "fault_${1}_message" "$3"
}
op=$("$BIGMAC" plan $SPEC -o - 2>/dev/null | awk '/"rank": 2/{r=1} r&&/"op": "compute"/{print n; exit} r&&/"op":/{n++}')
fault nan "${op:-0}:nan" "bigmac: error: rank 2: op #${op:-0} "
expect_contains fault_nan_says_not_finite "not finite"
fault crash "5:crash" ""
fault exit "5:exit" ""
# mpirun ends the others with SIGTERM (SIGKILL a second later): a rank waiting then says in which
# op, like a rank whose wait timed out, instead of vanishing without a word
if printf '%s\n' "$OUT_TXT" | grep -Eq "^bigmac: error: rank [013]: op #[0-9]+ .*the job was ended \(signal 15"; then
    echo "PASS fault_exit_others_name_their_op"; else
    echo "FAIL fault_exit_others_name_their_op"; printf '%s\n' "$OUT_TXT" | head -12 | sed 's/^/    /'; fi
if printf '%s\n' "$OUT_TXT" | grep -q "MPI_ABORT was invoked"; then
    echo "FAIL fault_exit_others_do_not_abort_again"; else echo "PASS fault_exit_others_do_not_abort_again"; fi
fault hang "5:hang" "no message after"
# a rank that hangs after its last op: the others wait in the gradient all-reduce, not forever
last=$("$BIGMAC" plan $SPEC -o - 2>/dev/null | awk '/"rank": 2/{r=1} r&&/"rank": 3/{print n-1; exit} r&&/"op":/{n++}')
fault hang_in_allreduce "${last:-0}:hang" "no gradient all-reduce result after"

# Checkpoint + resume == uninterrupted.
mpi 4 train $SPEC --steps 4 --quiet --log "$T/full.log" >/dev/null 2>&1
mpi 4 train $SPEC --steps 2 --quiet --checkpoint "$T/ckpt" --log "$T/part.log" >/dev/null 2>&1
mpi 4 train $SPEC --steps 4 --quiet --resume "$T/ckpt" --log "$T/part.log" >/dev/null 2>&1
if [ -f "$T/ckpt/step-00000002/rank-0.ckpt" ] && [ -f "$T/ckpt/step-00000002/rank-3.ckpt" ] &&
   [ -f "$T/ckpt/step-00000002/COMPLETE" ]; then echo "PASS checkpoint_file_per_rank"; else
    echo "FAIL checkpoint_file_per_rank"; fi
losses_match resume_losses_equal_uninterrupted "$T/part.log" "$T/full.log"
if [ "$(sed -n 3,4p "$T/part.log" | sed 's/.*"loss": \([^,]*\),.*/\1/')" = "$(sed -n 3,4p "$T/full.log" | sed 's/.*"loss": \([^,]*\),.*/\1/')" ]; then
    echo "PASS resume_step3_4_losses_identical"; else echo "FAIL resume_step3_4_losses_identical"; fi
expect_exit resume_wrong_pp_fails 1 mpi 2 train $SPEC --steps 4 --quiet --resume "$T/ckpt"
expect_contains resume_wrong_pp_message "step-00000002: a checkpoint of pp 4 vpp 2 (4 rank files); this run has pp 2"

# Usage errors (exit 2) need no MPI job.
expect_exit usage_checkpoint_every_needs_dir 2 "$BIGMAC" train $SPEC --local --checkpoint-every 2
expect_exit usage_reference_with_trace 2 "$BIGMAC" train $SPEC --reference --trace "$T/x.json"
expect_exit usage_bad_fault 2 "$BIGMAC" train $SPEC --local --inject-fault 1:2:boom

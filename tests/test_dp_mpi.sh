#!/usr/bin/env bash
# test_dp_mpi.sh — data parallel x pipeline parallel (issue 23) under mpirun against the
# single-process reference: `mpirun -np P*D bigmac train SPEC --pp P --dp D` trains D replicas
# of the pipeline, replica d on the step's global microbatches d*M .. d*M+M-1, so its losses and
# final parameters equal `train --reference --dp D` (= the reference with D*M microbatches)
# within 1e-4 relative, for bigmac, optimus and unified x 1f1b, interleaved and zb-h1 x
# P x D in {2x2, 1x2, 2x1}, and with two encoders. Also: the layout line, the log's layout,
# replica 0's measured peaks equal a one-pipeline run's (every replica walks the same table),
# the trace's process per global rank, checkpoints (one copy per pipeline rank; resumed with
# another dp; another pp refused), a rank dying mid-step, and bad layouts refused with one line.
# Every MPI run is wrapped in `timeout` so a bug is a failure, not a hang.
# suite: waits (tests/run.sh runs it in the lane beside the others: its time is spent waiting)
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
SPEC=examples/tiny-mllm.json
SPEC2=examples/tiny-mllm-2enc.json
STEPS=3
T=$TEST_TMP/dp_mpi
mkdir -p "$T"

# Usage errors need no MPI job: --dp must be a positive integer, and --local runs one pipeline.
expect_exit dp_zero_refused 2 "$BIGMAC" train $SPEC --local --dp 0
expect_contains dp_zero_message "--dp: expected a positive integer, got '0'"
expect_exit dp_with_local_refused 2 "$BIGMAC" train $SPEC --local --dp 2 --steps 1
expect_contains dp_with_local_message "--dp 2 with --local"
if [ "$(printf '%s\n' "$OUT_TXT" | grep -c 'bigmac: error')" = 1 ]; then echo "PASS dp_with_local_one_line"; else
    echo "FAIL dp_with_local_one_line"; printf '%s\n' "$OUT_TXT" | head -5 | sed 's/^/    /'; fi
# parallel.dp in the spec: positioned errors like the other parallel keys; a spec asking for
# replicas cannot run --local either
sed 's/"parallel": {/"parallel": {"dp": 0, /' $SPEC >"$T/dp0.json"
expect_exit spec_dp_zero_refused 1 "$BIGMAC" plan "$T/dp0.json"
expect_contains spec_dp_zero_positioned "dp0.json:"
expect_contains spec_dp_zero_names_key "parallel.dp"
sed 's/"parallel": {/"parallel": {"dp": 2, /' $SPEC >"$T/dp2.json"
expect_exit spec_dp_two_plans 0 "$BIGMAC" plan "$T/dp2.json"
expect_contains spec_dp_two_summary "P=4 V=2 M=8 U=4 W=2 D=2 (8 ranks, rank = p*2 + d)"
expect_exit spec_dp_local_refused 1 "$BIGMAC" train "$T/dp2.json" --local --steps 1
expect_contains spec_dp_local_message "dp 2: --local runs one pipeline"
# the table records dp (and only when > 1)
"$BIGMAC" plan $SPEC --pp 2 --dp 2 -o "$T/t22.json" >/dev/null
"$BIGMAC" plan $SPEC --pp 2 -o "$T/t21.json" >/dev/null
if grep -q '"dp": 2' "$T/t22.json" && ! grep -q '"dp"' "$T/t21.json"; then echo "PASS table_records_dp"; else
    echo "FAIL table_records_dp"; fi

# The reference over D replicas is the reference over D*M microbatches.
"$BIGMAC" train $SPEC --reference --dp 2 --steps $STEPS --log "$T/ref2.log" --dump-params "$T/ref2.bin" >/dev/null
"$BIGMAC" train $SPEC --reference --microbatches 16 --steps $STEPS --log "$T/ref16.log" \
    --dump-params "$T/ref16.bin" >/dev/null
"$BIGMAC" train $SPEC --reference --steps $STEPS --log "$T/ref1.log" --dump-params "$T/ref1.bin" >/dev/null
losses_match reference_dp2_is_16_microbatches "$T/ref2.log" "$T/ref16.log"
if cmp -s "$T/ref2.bin" "$T/ref16.bin"; then echo "PASS reference_dp2_params_are_16_microbatches"; else
    echo "FAIL reference_dp2_params_are_16_microbatches"; fi

if ! command -v mpirun >/dev/null; then
    echo "SKIP dp_mpi: no mpirun (make deps installs openmpi-bin)"
    exit 0
fi

mpi() { # mpi NP ARGS... : bigmac under mpirun, 90 s at most (4 ranks on 2 cores)
    local np=$1; shift
    timeout 90 mpirun --oversubscribe -np "$np" "$BIGMAC" "$@"
}

# dp_matches NAME SPEC REF P D BACKBONE POLICY : SPEC over P x D ranks matches the reference run
# whose log and parameters are REF.log and REF.bin
dp_matches() {
    local n=$1 spec=$2 ref=$3 P=$4 D=$5 bb=$6 pol=$7 V=1
    case $bb in interleaved) V=2 ;; esac
    if mpi $((P * D)) train "$spec" --pp "$P" --dp "$D" --vpp $V --backbone "$bb" --policy "$pol" --steps $STEPS \
           --quiet --log "$T/$n.log" --dump-params "$T/$n.bin" >"$T/$n.out" 2>&1; then
        losses_match "losses_${n}_match_reference" "$T/$n.log" "$ref.log"
        params_match "params_${n}_match_reference" "$T/$n.bin" "$ref.bin"
    else
        echo "FAIL run_$n"; sed 's/^/    /' "$T/$n.out" | tail -5
    fi
}

for pol in bigmac optimus unified; do
    for bb in 1f1b interleaved zb-h1; do
        dp_matches "${pol}_${bb}_p2d2" $SPEC "$T/ref2" 2 2 $bb $pol
        dp_matches "${pol}_${bb}_p1d2" $SPEC "$T/ref2" 1 2 $bb $pol
        dp_matches "${pol}_${bb}_p2d1" $SPEC "$T/ref1" 2 1 $bb $pol
    done
done

# Two encoders (chunk 0's concatenated input, one gradient per encoder) under data parallel.
"$BIGMAC" train $SPEC2 --reference --dp 2 --steps $STEPS --log "$T/ref2enc.log" --dump-params "$T/ref2enc.bin" >/dev/null
dp_matches two_enc_bigmac_1f1b_p2d2 $SPEC2 "$T/ref2enc" 2 2 1f1b bigmac
dp_matches two_enc_optimus_interleaved_p2d2 $SPEC2 "$T/ref2enc" 2 2 interleaved optimus
dp_matches two_enc_unified_zb-h1_p1d2 $SPEC2 "$T/ref2enc" 1 2 zb-h1 unified

# The issue's check: tiny-mllm, pp 2 x dp 2, five steps, against its reference.
"$BIGMAC" train $SPEC --reference --dp 2 --steps 5 --log "$T/ref5.log" --dump-params "$T/ref5.bin" >/dev/null
expect_exit done_when_runs 0 mpi 4 train $SPEC --pp 2 --dp 2 --steps 5 --log "$T/dw.log" --dump-params "$T/dw.bin" \
    --trace "$T/dw.json"
losses_match done_when_losses_match_reference "$T/dw.log" "$T/ref5.log"
params_match done_when_params_match_reference "$T/dw.bin" "$T/ref5.bin"
paste -d' ' <(sed 's/.*"step": \([0-9]*\), "loss": \([^,]*\),.*/\1 \2/' "$T/dw.log") \
    <(sed 's/.*"loss": \([^,]*\),.*/\1/' "$T/ref5.log") | awk '{print "    step " $1 ": pp 2 x dp 2 " $2 ", reference " $3}'
# the rule, once, first
if [ "$(printf '%s\n' "$OUT_TXT" | grep -c '^layout: pp 2 × dp 2, rank = p\*2 + d$')" = 1 ] &&
   [ "$(printf '%s\n' "$OUT_TXT" | head -1)" = "layout: pp 2 × dp 2, rank = p*2 + d" ]; then
    echo "PASS layout_line_once_first"; else echo "FAIL layout_line_once_first"; printf '%s\n' "$OUT_TXT" | head -3 | sed 's/^/    /'; fi
expect_contains progress_says_global_batch "16 microbatches/step (8 per replica)"
# the log's layout: pp, dp, and every global rank with its pipeline rank and replica
if grep -q '"layout": {"pp": 2, "dp": 2}' "$T/dw.log" &&
   grep -q '{"rank": 3, "pp": 1, "dp": 1, "peak_act_bytes"' "$T/dw.log" &&
   [ "$(head -1 "$T/dw.log" | grep -o '"rank": ' | wc -l)" = 4 ]; then echo "PASS log_has_layout"; else
    echo "FAIL log_has_layout"; head -c 600 "$T/dw.log" | sed 's/^/    /'; fi
# the trace: one process per global rank, named "pp p / dp d", sorted by global rank; replica 0's
# are the embedded table's ranks, so it renders and calibrates like a one-pipeline trace
for pd in "0 0 0" "0 1 1" "1 0 2" "1 1 3"; do
    set -- $pd
    pid=$(( $2 * 2 + $1 ))
    if grep -q "{\"ph\":\"M\",\"pid\":$pid,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"pp $1 / dp $2\"}}" "$T/dw.json" &&
       grep -q "{\"ph\":\"M\",\"pid\":$pid,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":$3}}" "$T/dw.json"; then
        echo "PASS trace_row_pp$1_dp$2"; else echo "FAIL trace_row_pp$1_dp$2"; fi
done
rows=$(grep -o '"ph":"X","pid":[0-9]*' "$T/dw.json" | sort -u | wc -l)
if [ "$rows" = 4 ]; then echo "PASS trace_ops_of_every_rank"; else echo "FAIL trace_ops_of_every_rank: $rows pids"; fi
expect_exit dp_trace_renders 0 "$BIGMAC" render "$T/dw.json" --format ascii
expect_contains dp_trace_renders_measured "measured timeline"
expect_exit dp_trace_calibrates 0 "$BIGMAC" calibrate "$T/dw.json" -o "$T/dw_costs.json"
# calibrate fits the slowest replica of a data-parallel trace (the step ends with it): the replica
# whose ops end last, read here from the trace's own events, is the one the default takes, for
# the 4-rank trace above and a pp 1 x dp 2 run's traced steps; --replica past dp is refused
mpi 2 train $SPEC --pp 1 --dp 2 --steps 4 --quiet --trace "$T/d12.json" --trace-from 2 >/dev/null 2>&1
slowest() { # slowest TRACE P: the replica with the latest op end (the first of equal ones)
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
P, end = int(sys.argv[2]), {}
for e in ev:
    if e.get("ph") == "X" and "op" in e.get("args", {}):
        d = e["pid"] // P
        end[d] = max(end.get(d, 0), e["ts"] + e["dur"])
print(max(sorted(end), key=lambda d: (end[d], -d)) if len(end) > 1 else "none")
PY
}
for tp in "dw.json 2" "d12.step3.json 1" "d12.step4.json 1"; do
    set -- $tp
    d=$(slowest "$T/$1" $2 2>/dev/null || echo none)
    if [ "$d" != none ] &&
       "$BIGMAC" calibrate "$T/$1" --mean -o "$T/sl_default.json" 2>/dev/null &&
       "$BIGMAC" calibrate "$T/$1" --mean --replica "$d" -o "$T/sl_named.json" 2>/dev/null &&
       cmp -s "$T/sl_default.json" "$T/sl_named.json"; then echo "PASS dp_calibrate_takes_slowest_replica_$1 (replica $d)"
    else echo "FAIL dp_calibrate_takes_slowest_replica_$1 (replica $d)"; fi
done
expect_exit dp_calibrate_replica_past_dp 1 "$BIGMAC" calibrate "$T/dw.json" --replica 2
expect_contains dp_calibrate_replica_past_dp_says "--replica 2: the run had 2 data-parallel replicas (0..1)"

# Measured peaks: every replica walks the same table, so replica 0 (global ranks 0 and 2), which
# trains the same microbatches as one pipeline of M, has that pipeline's peaks in every step
# (and tests/test_exec.c shows those equal the simulator's given the measured bytes).
mpi 2 train $SPEC --pp 2 --steps 5 --quiet --log "$T/d1.log" >/dev/null 2>&1
peaks() { # peaks LOG RANK... : per step, the listed ranks' peak bytes
    local log=$1; shift
    for r in "$@"; do grep -o "{\"rank\": $r, [^}]*}}" "$log" | grep -o '"peak_act_bytes": {.*}'; done
}
if [ -s "$T/d1.log" ] && [ "$(peaks "$T/dw.log" 0 2)" = "$(peaks "$T/d1.log" 0 1)" ]; then
    echo "PASS replica0_peaks_equal_one_pipeline"; else echo "FAIL replica0_peaks_equal_one_pipeline"; fi
# with data of one shape (one image per sample), every replica has those peaks
sed 's/"max_images": 2/"max_images": 1/' $SPEC >"$T/one_image.json"
mpi 4 train "$T/one_image.json" --pp 2 --dp 2 --steps 2 --quiet --log "$T/oi2.log" >/dev/null 2>&1
mpi 2 train "$T/one_image.json" --pp 2 --steps 2 --quiet --log "$T/oi1.log" >/dev/null 2>&1
if [ -s "$T/oi1.log" ] && [ "$(peaks "$T/oi2.log" 0 2)" = "$(peaks "$T/oi1.log" 0 1)" ] &&
   [ "$(peaks "$T/oi2.log" 1 3)" = "$(peaks "$T/oi1.log" 0 1)" ]; then
    echo "PASS every_replica_peaks_equal_one_pipeline"; else echo "FAIL every_replica_peaks_equal_one_pipeline"; fi

# Bad layouts are refused before training with one clear line (rank 0's).
one_error() { # one_error NAME : the last output has exactly one "bigmac: error" line
    if [ "$(printf '%s\n' "$OUT_TXT" | grep -c 'bigmac: error')" = 1 ]; then echo "PASS $1"; else
        echo "FAIL $1"; printf '%s\n' "$OUT_TXT" | head -5 | sed 's/^/    /'; fi
}
expect_exit layout_world_not_multiple 1 mpi 3 train $SPEC --dp 2 --steps 1 --quiet
expect_contains layout_world_not_multiple_message "3 ranks cannot hold 2 data-parallel replicas"
one_error layout_world_not_multiple_one_line
expect_exit layout_world_not_pp_dp 1 mpi 4 train $SPEC --pp 4 --dp 2 --steps 1 --quiet
expect_contains layout_world_not_pp_dp_message "the layout pp 4 × dp 2 needs 8 ranks but 4 run it"
expect_contains layout_world_not_pp_dp_hint "hint: mpirun -np 8, or --pp 2"
one_error layout_world_not_pp_dp_one_line
expect_exit layout_table_not_world 1 mpi 2 train $SPEC --table "$T/t22.json" --dp 2 --steps 1 --quiet
expect_contains layout_table_not_world_message "t22.json: the layout pp 2 × dp 2 needs 4 ranks but 2 run it"
one_error layout_table_not_world_one_line
# a table that records dp 2 runs as two replicas by itself
expect_exit table_dp_runs 0 mpi 4 train $SPEC --table "$T/t22.json" --steps 2 --quiet --log "$T/t22.log"
head -2 "$T/ref2.log" >"$T/ref2_2.log"
losses_match table_dp_matches_reference "$T/t22.log" "$T/ref2_2.log"

# Checkpoints: one copy per pipeline rank (replica 0 writes it), every replica loads it.
mpi 4 train $SPEC --pp 2 --dp 2 --steps 4 --quiet --log "$T/full.log" >/dev/null 2>&1
mpi 4 train $SPEC --pp 2 --dp 2 --steps 2 --quiet --checkpoint "$T/ck" --log "$T/part.log" >/dev/null 2>&1
# (a committed set: DIR/step-<N>/rank-<p>.ckpt per pipeline rank and the COMPLETE marker)
cs="$T/ck/step-00000002"
if [ -f "$cs/rank-0.ckpt" ] && [ -f "$cs/rank-1.ckpt" ] && [ ! -e "$cs/rank-2.ckpt" ] &&
   [ ! -e "$cs/rank-3.ckpt" ] && [ -f "$cs/COMPLETE" ]; then echo "PASS checkpoint_one_copy_per_pipeline_rank"; else
    echo "FAIL checkpoint_one_copy_per_pipeline_rank: $(ls -R "$T/ck" 2>&1 | tr '\n' ' ')"; fi
if grep -qx 'microbatches 16' "$cs/COMPLETE"; then echo "PASS checkpoint_records_the_steps_microbatches"; else
    echo "FAIL checkpoint_records_the_steps_microbatches: $(grep microbatches "$cs/COMPLETE")"; fi
cp -r "$T/ck" "$T/ck_d1"
mpi 4 train $SPEC --pp 2 --dp 2 --steps 4 --quiet --resume "$T/ck" --log "$T/part.log" >/dev/null 2>&1
losses_match dp_resume_equals_uninterrupted "$T/part.log" "$T/full.log"
if [ "$(sed -n 3,4p "$T/part.log" | sed 's/.*"loss": \([^,]*\),.*/\1/')" = \
     "$(sed -n 3,4p "$T/full.log" | sed 's/.*"loss": \([^,]*\),.*/\1/')" ]; then
    echo "PASS dp_resume_step3_4_identical"; else echo "FAIL dp_resume_step3_4_identical"; fi
# The state does not depend on D: the dp 2 checkpoint resumed by one pipeline of twice the
# microbatches (the same global batch) continues exactly as the uninterrupted dp 2 run.
cp "$T/part.log" "$T/part_d1.log" && sed -i 3,4d "$T/part_d1.log"
mpi 2 train $SPEC --pp 2 --microbatches 16 --steps 4 --quiet --resume "$T/ck_d1" --log "$T/part_d1.log" >/dev/null 2>&1
losses_match resume_with_other_dp "$T/part_d1.log" "$T/full.log"
# and a one-pipeline checkpoint resumed by two replicas of half the microbatches
mpi 2 train $SPEC --pp 2 --microbatches 16 --steps 2 --quiet --checkpoint "$T/ck16" --log "$T/p16.log" >/dev/null 2>&1
mpi 4 train $SPEC --pp 2 --dp 2 --steps 4 --quiet --resume "$T/ck16" --log "$T/p16.log" >/dev/null 2>&1
losses_match resume_one_pipeline_ckpt_with_dp2 "$T/p16.log" "$T/full.log"
# another pp is refused with a clear message
expect_exit resume_other_pp_refused 1 mpi 4 train $SPEC --pp 4 --dp 1 --steps 4 --quiet --resume "$T/ck"
expect_contains resume_other_pp_message "a checkpoint of pp 2 vpp"
expect_contains resume_other_pp_message_this_run "this run has pp 4"

# A rank dies mid-step: global rank 3 (pp 1 / dp 1) crashes in step 3 (SIGSEGV). Every rank
# exits within seconds, mpirun names the dead rank, and the last checkpoint (step 2: every rank
# waits for the step's checkpoints before the next step) resumes to the uninterrupted losses.
op=$("$BIGMAC" plan $SPEC --pp 2 -o - 2>/dev/null | awk '/"rank": 1/{r=1} r&&/"op": "compute"/{print n+0; exit} r&&/"op":/{n++}')
rm -rf "$T/ckd"
t0=$(date +%s)
OUT_TXT=$(timeout 60 mpirun --oversubscribe -np 4 "$BIGMAC" train $SPEC --pp 2 --dp 2 --steps 4 --quiet \
          --timeout 10 --checkpoint "$T/ckd" --checkpoint-every 1 --log "$T/dead.log" --inject-fault "3:${op:-0}:crash:2" 2>&1)
rc=$? dt=$(( $(date +%s) - t0 ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -le 25 ]; then echo "PASS dead_rank_all_exit"; else
    echo "FAIL dead_rank_all_exit: exit $rc after ${dt}s"; printf '%s\n' "$OUT_TXT" | head -10 | sed 's/^/    /'; fi
# mpirun names the dead rank: "process rank 3 ... exited on signal 11", or, where a sanitizer
# turns the signal into an exit status, "Process name: [[JOB,1],3]"
if printf '%s\n' "$OUT_TXT" | grep -Eq 'process rank 3 |Process name: \[\[[0-9]+,[0-9]+\],3\]'; then
    echo "PASS dead_rank_named"; else echo "FAIL dead_rank_named"; printf '%s\n' "$OUT_TXT" | tail -8 | sed 's/^/    /'; fi
if [ "$(wc -l <"$T/dead.log")" = 2 ]; then echo "PASS dead_rank_two_steps_logged"; else
    echo "FAIL dead_rank_two_steps_logged: $(wc -l <"$T/dead.log")"; fi
mpi 4 train $SPEC --pp 2 --dp 2 --steps 4 --quiet --resume "$T/ckd" --log "$T/dead.log" >/dev/null 2>&1
losses_match dead_rank_resume_equals_uninterrupted "$T/dead.log" "$T/full.log"
# a rank that hangs: its replica's peer names it, and every rank ends
t0=$(date +%s)
OUT_TXT=$(timeout 60 mpirun --oversubscribe -np 4 "$BIGMAC" train $SPEC --pp 2 --dp 2 --steps 2 --quiet \
          --timeout 3 --inject-fault "3:${op:-0}:hang:1" 2>&1)
rc=$? dt=$(( $(date +%s) - t0 ))
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $dt -le 30 ]; then echo "PASS hung_rank_all_exit"; else
    echo "FAIL hung_rank_all_exit: exit $rc after ${dt}s"; printf '%s\n' "$OUT_TXT" | head -10 | sed 's/^/    /'; fi
expect_contains hung_rank_named "rank 3 (pp 1 / dp 1) does not answer: it hung or died"

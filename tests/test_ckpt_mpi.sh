#!/usr/bin/env bash
# test_ckpt_mpi.sh — checkpoints as sets (docs/executor.md "Checkpoints", issue 27 cases 2 and 13):
#   * a rank killed while a set is being written (--inject-fault R:checkpoint:exit:STEP, which
#     ends the rank with its file half written, deterministically): the set of that step has no
#     commit marker, the previous set is whole, and --resume continues from it with the losses of
#     an uninterrupted run, each step once in the log; in one process (--local) and under mpirun;
#     a rank that hangs there instead: the others fail in the barrier, nothing is committed;
#   * a crash after the last checkpoint (an op fault): the resumed log holds every step once;
#   * --resume refuses a spec with other training settings (naming them) unless --resume-force,
#     refuses --steps below the checkpoint's step, and a fresh run does not overwrite another
#     run's checkpoint.
# Every MPI run is wrapped in `timeout`, so a bug is a failure, not a hang.
# suite: waits (tests/run.sh runs it in the lane beside the others: its time is spent waiting)
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
SPEC=examples/tiny-mllm.json
T=$TEST_TMP/ckpt_mpi
rm -rf "$T"
mkdir -p "$T"

steps_of() { sed 's/^{"step": \([0-9]*\),.*/\1/' "$1" | tr '\n' ' '; } # the log's step numbers
losses_of() { sed 's/.*"loss": \([^,]*\),.*/\1/' "$1" | tr '\n' ' '; }

# set_state NAME DIR : DIR holds a complete set at step 4 and an uncommitted one at step 6
set_state() {
    if [ -f "$2/step-00000004/COMPLETE" ] && [ ! -f "$2/step-00000006/COMPLETE" ] && [ -d "$2/step-00000006" ] &&
       [ "$(ls "$2"/step-00000004/rank-*.ckpt | wc -l)" = 4 ]; then
        echo "PASS $1"
    else
        echo "FAIL $1:"; (cd "$2" 2>/dev/null && find . | sort | sed 's/^/    /')
    fi
}

# 1. In one process: rank 1 dies writing its file of step 6's set (ranks run in order, so rank 0's
# file of that set is complete: exactly the mixed state that made --resume refuse before).
"$BIGMAC" train $SPEC --local --steps 8 --quiet --log "$T/local_full.log" >/dev/null 2>&1 || echo "FAIL ckpt_local_full_run"
expect_exit ckpt_local_killed_while_writing 3 "$BIGMAC" train $SPEC --local --steps 8 --quiet --checkpoint "$T/lck" \
    --checkpoint-every 2 --log "$T/local.log" --inject-fault 1:checkpoint:exit:5
set_state ckpt_local_previous_set_complete "$T/lck"
if [ -f "$T/lck/step-00000006/rank-0.ckpt" ] && [ -f "$T/lck/step-00000006/rank-1.ckpt.tmp" ]; then
    echo "PASS ckpt_local_killed_mid_set"; else echo "FAIL ckpt_local_killed_mid_set"; fi
expect_exit ckpt_local_resume 0 "$BIGMAC" train $SPEC --local --steps 8 --checkpoint "$T/lck" --checkpoint-every 2 \
    --resume "$T/lck" --log "$T/local.log"
expect_contains ckpt_local_resume_takes_previous_set "resumed from $T/lck/step-00000004 after step 4"
if [ "$(steps_of "$T/local.log")" = "1 2 3 4 5 6 7 8 " ] && [ "$(losses_of "$T/local.log")" = "$(losses_of "$T/local_full.log")" ]; then
    echo "PASS ckpt_local_resume_equals_uninterrupted"; else
    echo "FAIL ckpt_local_resume_equals_uninterrupted: steps $(steps_of "$T/local.log")"; fi
# the new commit replaced the old sets: one set, the last
if [ "$(ls "$T/lck")" = step-00000008 ] && [ -f "$T/lck/step-00000008/COMPLETE" ]; then
    echo "PASS ckpt_local_older_sets_removed_after_commit"; else echo "FAIL ckpt_local_older_sets_removed_after_commit: $(ls "$T/lck")"; fi

# 2. Training settings are recorded: another lr and data seed are refused by name, unless forced
# (a checkpoint of its own, written without faults).
"$BIGMAC" train $SPEC --local --steps 4 --quiet --checkpoint "$T/sck" >/dev/null 2>&1 || echo "FAIL ckpt_settings_run"
sed 's/"lr": 0.003/"lr": 0.002/; s/"seed": 1, "samples_per_microbatch"/"seed": 7, "samples_per_microbatch"/' $SPEC >"$T/other.json"
expect_exit ckpt_resume_other_settings_refused 1 "$BIGMAC" train "$T/other.json" --local --steps 5 --quiet --resume "$T/sck"
expect_contains ckpt_resume_other_settings_named "train.lr 0.003 (this run: 0.002); data.seed 1 (this run: 7)"
expect_contains ckpt_resume_other_settings_hint "--resume-force"
expect_exit ckpt_resume_force 0 "$BIGMAC" train "$T/other.json" --local --steps 5 --quiet --resume "$T/sck" --resume-force
expect_contains ckpt_resume_force_warns "bigmac: warning: --resume-force: $T/sck/step-00000004 was trained with other settings: train.lr"
# --steps below the checkpoint's step: nothing would be trained; an error, not the checkpoint as a result
expect_exit ckpt_steps_below_checkpoint 1 "$BIGMAC" train $SPEC --local --steps 3 --quiet --resume "$T/sck" \
    --dump-params "$T/below.bin"
expect_contains ckpt_steps_below_checkpoint_message "--steps 3 is below the checkpoint's step 4"
if [ ! -e "$T/below.bin" ]; then echo "PASS ckpt_steps_below_writes_nothing"; else echo "FAIL ckpt_steps_below_writes_nothing"; fi
# a fresh run does not replace another run's checkpoint
expect_exit ckpt_fresh_run_keeps_other_runs_set 1 "$BIGMAC" train $SPEC --local --steps 2 --quiet --checkpoint "$T/sck"
expect_contains ckpt_fresh_run_message "--checkpoint $T/sck: holds a complete checkpoint of step 4 already"

if ! command -v mpirun >/dev/null; then
    echo "SKIP ckpt_mpi: no mpirun (make deps installs openmpi-bin)"
    exit 0
fi
mpi() { timeout 90 mpirun --oversubscribe -np 4 "$BIGMAC" "$@"; }

# 3. Under mpirun: rank 2 dies writing its file of step 6's set; the job ends, the set of step 4
# stays current, and resuming gives the uninterrupted run's losses, each step once.
mpi train $SPEC --steps 8 --quiet --log "$T/mpi_full.log" >/dev/null 2>&1 || echo "FAIL ckpt_mpi_full_run"
OUT_TXT=$(mpi train $SPEC --steps 8 --quiet --checkpoint "$T/mck" --checkpoint-every 2 --log "$T/mpi.log" \
          --inject-fault 2:checkpoint:exit:5 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then echo "PASS ckpt_mpi_killed_while_writing"; else
    echo "FAIL ckpt_mpi_killed_while_writing: exit $rc"; fi
set_state ckpt_mpi_previous_set_complete "$T/mck"
expect_exit ckpt_mpi_resume 0 mpi train $SPEC --steps 8 --checkpoint "$T/mck" --checkpoint-every 2 --resume "$T/mck" \
    --log "$T/mpi.log"
expect_contains ckpt_mpi_resume_takes_previous_set "resumed from $T/mck/step-00000004 after step 4"
if [ "$(steps_of "$T/mpi.log")" = "1 2 3 4 5 6 7 8 " ] && [ "$(losses_of "$T/mpi.log")" = "$(losses_of "$T/mpi_full.log")" ]; then
    echo "PASS ckpt_mpi_resume_equals_uninterrupted"; else echo "FAIL ckpt_mpi_resume_equals_uninterrupted: steps $(steps_of "$T/mpi.log")"; fi

# A rank that hangs while writing: the others time out in the barrier; nothing is committed.
mpi train $SPEC --steps 4 --quiet --checkpoint "$T/hck" --checkpoint-every 2 >/dev/null 2>&1
expect_exit ckpt_mpi_hang_while_writing 1 mpi train $SPEC --steps 6 --quiet --timeout 3 --checkpoint "$T/hck" \
    --checkpoint-every 2 --resume "$T/hck" --inject-fault 1:checkpoint:hang:5
expect_contains ckpt_mpi_hang_message "the checkpoint of step 6: no all-reduce result after 3 s"
if [ -f "$T/hck/step-00000004/COMPLETE" ] && [ ! -f "$T/hck/step-00000006/COMPLETE" ]; then
    echo "PASS ckpt_mpi_hang_commits_nothing"; else echo "FAIL ckpt_mpi_hang_commits_nothing"; fi

# 4. A crash after the last checkpoint (rank 2 exits at an op of step 6; checkpoints every 4):
# the resumed run trains steps 5.. again, and the log holds each step once (issue 27, case 13).
OUT_TXT=$(mpi train $SPEC --steps 8 --quiet --checkpoint "$T/cck" --checkpoint-every 4 --log "$T/crash.log" \
          --inject-fault 2:5:exit:5 2>&1)
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(steps_of "$T/crash.log")" = "1 2 3 4 5 " ]; then
    echo "PASS ckpt_mpi_crash_after_checkpoint"; else echo "FAIL ckpt_mpi_crash_after_checkpoint: exit $rc, steps $(steps_of "$T/crash.log")"; fi
expect_exit ckpt_mpi_crash_resume 0 mpi train $SPEC --steps 8 --quiet --resume "$T/cck" --log "$T/crash.log"
if [ "$(steps_of "$T/crash.log")" = "1 2 3 4 5 6 7 8 " ] && [ "$(losses_of "$T/crash.log")" = "$(losses_of "$T/mpi_full.log")" ]; then
    echo "PASS ckpt_mpi_resumed_log_has_each_step_once"; else
    echo "FAIL ckpt_mpi_resumed_log_has_each_step_once: steps $(steps_of "$T/crash.log")"; fi

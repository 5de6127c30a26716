#!/usr/bin/env bash
# bench_step.sh — predicting the WHOLE training step (walk + exposed gradient sync + optimizer,
# docs/simulator.md "The step"), not the walk, of the C executor at P x D = 2 x 1 and 1 x 2
# (one rank per core) and 2 x 2 (4 ranks on 2 cores: oversubscribed), and of the torch executor
# at 2 x 1, on examples/tiny-mllm.json (vpp 2, M 8), from a calibration of a SEPARATE run.
# Per configuration, REPS calibration runs and REPS measured runs, interleaved A B A B ... (torch:
# REPS x CAL_REPS_TORCH of each, since it traces its last step only): this VM's speed moves by
# ~10% from one process to the next, so one calibration run against one measured run is a coin
# toss; the prediction is compared over many processes of each kind, each counted once:
#   calibration run:  train ... --steps $STEPS --log cal.log --trace cal.json [--trace-from 2]
#   the table:        bigmac plan SPEC --pp P --dp D -o T      (the table `train` runs)
#   prediction (docs/simulator.md "Predicting a run", "The step"): every traced step on its own
#                     (at dp > 1 its slowest replica, calibrate's default), with its op-time spread:
#                     bigmac calibrate cal.stepK.json --spec SPEC --mean --rank-scale --spread --step-log cal.log -o CAL
#                     bigmac simulate CAL --table T --json  -> expected_makespan_ms + (step_ms - makespan_ms)
#                     (the expected walk, then the exposed sync and the optimizer); a calibration
#                     run's prediction is the median over its steps, the configuration's the median
#                     over the calibration runs
#   measured run:     train ... --steps $STEPS --log meas.log  -> over steps 2.., the median of
#                     the step from its origin to the last rank's end (max over ranks of
#                     sync_end_ms + optimizer_ms: walk, collectives, AdamW; what step_ms
#                     predicts); the configuration's: the median over the measured runs
#   error:            prediction / measured - 1 (the two medians over processes); the paired
#                     error compares calibration run i with the measured run right after it (its
#                     spread is the machine's, not the model's); the same-step error (each traced
#                     step's prediction over that very step's measured time) is the model's
#                     error without any drift between processes
#   after the walk:   expected_makespan_ms + sync_total_ms + optimizer_ms, the step if every
#                     collective ran after the walk (what both executors did before they
#                     overlapped the gradients' collectives with the cooldown, as the model does)
#   pooled (as before): every trace in one calibration, --mean --rank-scale, simulate -> step_ms
# Printed: the rerun command, then a Markdown row per configuration with the predictions and
# their signed errors, the measured and the calibration runs' median step, the prediction's parts
# (expected walk, exposed sync, optimizer), the measured walk and tail (median over steps and
# ranks of sync_end - walk + optimizer_ms), and the machine's load average. Nothing is asserted.
# CONFIGS picks configurations (default 'c 2 1,c 1 2,torch 2 1,c 2 2'). About 15 s per
# configuration and REPS at STEPS=12 on 2 cores.
# As bench_exec.sh, the ranks run at real-time priority (SCHED_FIFO via chrt, root only; RT=0
# turns it off) to emulate dedicated cores on a shared machine, except the oversubscribed 2 x 2
# (4 FIFO ranks on 2 cores would not share a core: it runs at normal priority, which is what
# oversubscription is).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BIGMAC:=bin/bigmac}"
: "${STEPS:=12}"
: "${REPS:=1}"
: "${PYTHON:=/usr/bin/python3}"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
PRIO=""
if [ "${RT:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v chrt >/dev/null; then PRIO="chrt -f 10"; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
SPEC=examples/tiny-mllm.json

# train KIND P D OUT ARGS...: one run (KIND c or torch) writing OUT.log and OUT.json
train() {
    local kind=$1 p=$2 d=$3 out=$4; shift 4
    local np=$((p * d)) over="" prio=$PRIO
    [ "$np" -gt 2 ] && over=--oversubscribe prio=""
    if [ "$kind" = c ]; then
        timeout 600 mpirun $over -np $np $prio "$BIGMAC" train $SPEC --pp $p --dp $d --steps $STEPS --quiet \
            --log "$out.log" --trace "$out.json" --trace-from 2 "$@" >"$out.out" 2>&1
    else
        timeout 600 $prio "$PYTHON" -m bigmac.torch train $SPEC --nproc $np --pp $p --dp $d --steps $STEPS \
            --log "$out.log" --trace "$out.json" "$@" >"$out.out" 2>&1
    fi
}

echo "priority: ${PRIO:-normal} (2 x 2: normal); STEPS=$STEPS REPS=$REPS CAL_REPS_TORCH=${CAL_REPS_TORCH:-3}"
echo "rerun: STEPS=$STEPS REPS=$REPS CONFIGS='${CONFIGS:-c 2 1,c 1 2,torch 2 1,c 2 2}' bench/bench_step.sh"
echo "| executor | P x D | runs (calibration + measured) | predicted step ms (median of the calibration runs) | measured step ms (median of the measured runs) | error | paired error (median; min..max) | same-step error (median) | if every collective ran after the walk | error | predicted step ms (pooled) | error | calibration runs' step ms (median of runs) | predicted walk (expected) / exposed sync (all sync) / optimizer ms | measured walk / sync+optimizer ms | load |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
IFS=, read -r -a CFGS <<<"${CONFIGS:-c 2 1,c 1 2,torch 2 1,c 2 2}"
for cfg in "${CFGS[@]}"; do
    set -- $cfg
    kind=$1 p=$2 d=$3 tag="$1_$2x$3"
    logs=() ; traces=() ; steps=()
    ok=1
    ncal=$REPS
    [ "$kind" = torch ] && ncal=$((REPS * ${CAL_REPS_TORCH:-3}))
    # calibration and measured runs interleaved (cal, meas, cal, meas, ...): a machine whose
    # speed drifts over the minute gives both kinds the same mix
    for r in $(seq 1 "$ncal"); do
        train $kind $p $d "$T/$tag.cal$r" || { ok=0; echo "bench_step: $tag calibration run failed" >&2; tail -3 "$T/$tag.cal$r.out" >&2; }
        logs+=("$T/$tag.cal$r.log")
        if [ "$kind" = c ]; then traces+=("$T/$tag.cal$r".step*.json); else traces+=("$T/$tag.cal$r.json"); fi
        train $kind $p $d "$T/$tag.meas$r" || { ok=0; echo "bench_step: $tag measured run failed" >&2; tail -3 "$T/$tag.meas$r.out" >&2; }
        steps+=("$T/$tag.meas$r.log")
    done
    [ $ok = 1 ] || continue
    cat "${logs[@]}" >"$T/$tag.cal.log"
    "$BIGMAC" plan $SPEC --pp $p --dp $d -o "$T/$tag.table.json" >/dev/null
    # pooled: every trace in one calibration (means over all of them), the deterministic step
    "$BIGMAC" calibrate "${traces[@]}" --spec $SPEC --mean --rank-scale --step-log "$T/$tag.cal.log" -o "$T/$tag.cal.spec.json" \
        2>"$T/$tag.calib.err" || { echo "bench_step: $tag calibrate failed: $(cat "$T/$tag.calib.err")" >&2; continue; }
    "$BIGMAC" simulate "$T/$tag.cal.spec.json" --table "$T/$tag.table.json" --json >"$T/$tag.sim.json"
    # per step, expected (docs/simulator.md "Predicting a run"): each traced step calibrated on its
    # own (its slowest replica at dp > 1) with its op-time spread, its expected walk + the step after it
    # (each with the log and step it traced: "SIM LOG STEP" lines, for the same-step error)
    : >"$T/$tag.sims"
    for i in "${!traces[@]}"; do
        f=${traces[$i]} st=$STEPS
        [[ $f =~ \.step([0-9]+)\.json$ ]] && st=${BASH_REMATCH[1]}
        "$BIGMAC" calibrate "$f" --spec $SPEC --mean --rank-scale --spread --step-log "$T/$tag.cal.log" \
            -o "$T/$tag.s$i.spec.json" 2>/dev/null &&
        "$BIGMAC" simulate "$T/$tag.s$i.spec.json" --table "$T/$tag.table.json" --json >"$T/$tag.s$i.sim.json" &&
        echo "$T/$tag.s$i.sim.json ${f%%.step*}.log $st" | sed 's/\.json\.log /.log /' >>"$T/$tag.sims"
    done
    "$PYTHON" - "$T/$tag.sim.json" "$kind" "$p x $d" "$(cut -d' ' -f1-3 /proc/loadavg)" "${#steps[@]}" "${steps[@]}" \
        "${#logs[@]}" "${logs[@]}" "$T/$tag.sims" <<'PY'
import json, statistics, sys
a = sys.argv
sim = json.load(open(a[1]))
kind, layout, load = a[2], a[3], a[4]
n = int(a[5]); meas_logs = a[6:6 + n]
m = int(a[6 + n]); cal_logs = a[7 + n:7 + n + m]
rows = [l.split() for l in open(a[7 + n + m])]
sims = [json.load(open(r[0])) for r in rows]
med = statistics.median
def step_of(log, k):  # the measured step k of a log (origin to the last rank's end)
    for l in open(log):
        j = json.loads(l)
        if j["step"] == k:
            return max(r["sync_end_ms"] + r["optimizer_ms"] for r in j["ranks"])
def run_steps(path):  # one run's steps 2.. (step, walk, per-rank tails)
    out = []
    for l in open(path):
        j = json.loads(l)
        if j["step"] != 1:
            out.append((max(r["sync_end_ms"] + r["optimizer_ms"] for r in j["ranks"]),
                        max(r["walk_ms"] for r in j["ranks"]),
                        [r["sync_end_ms"] - r["walk_ms"] + r["optimizer_ms"] for r in j["ranks"]]))
    return out
meas_runs = [run_steps(p) for p in meas_logs]
meas_run_med = [med(s[0] for s in r) for r in meas_runs]  # each measured process's median step
meas = med(meas_run_med)                                 # ... and the median over the processes
mwalk = med(s[1] for r in meas_runs for s in r)
mtail = med(t for r in meas_runs for s in r for t in s[2])
cal = med(med(s[0] for s in run_steps(p)) for p in cal_logs)
def exp_step(s):
    return s.get("expected_makespan_ms", s["makespan_ms"]) + s["step_ms"] - s["makespan_ms"]
def exp_seq(s):  # every collective after the walk, one after another (the executors before the overlap)
    return s.get("expected_makespan_ms", s["makespan_ms"]) + s["sync_total_ms"] + s["optimizer_ms"]
by_run = {}  # each calibration process's per-step predictions
for s, r in zip(sims, rows):
    by_run.setdefault(r[1], []).append(s)
pred_run = [med(exp_step(s) for s in v) for v in by_run.values()]
pred = med(pred_run)  # the median over the calibration processes of each one's median prediction
seq = med(med(exp_seq(s) for s in v) for v in by_run.values())
paired = [p / q - 1 for p, q in zip(pred_run, meas_run_med)]  # calibration run i vs the measured run after it
pwalk = med(s.get("expected_makespan_ms", s["makespan_ms"]) for s in sims)
psync = med(s["sync_exposed_ms"] for s in sims)
ptot = med(s["sync_total_ms"] for s in sims)
popt = med(s["optimizer_ms"] for s in sims)
pooled = sim["step_ms"]
same = med(exp_step(s) / step_of(r[1], int(r[2])) - 1 for s, r in zip(sims, rows))
print("| %s | %s | %d + %d | %.2f | %.2f | %+.1f%% | %+.1f%% (%+.1f..%+.1f%%) | %+.1f%% | %.2f | %+.1f%% | %.2f | %+.1f%% | %.2f | %.2f / %.2f (%.2f) / %.2f | %.2f / %.2f | %s |" % (
    "C" if kind == "c" else "torch", layout, len(pred_run), len(meas_run_med), pred, meas, (pred / meas - 1) * 100,
    med(paired) * 100, min(paired) * 100, max(paired) * 100, same * 100, seq, (seq / meas - 1) * 100,
    pooled, (pooled / meas - 1) * 100, cal, pwalk, psync, ptot, popt, mwalk, mtail, load))
PY
done

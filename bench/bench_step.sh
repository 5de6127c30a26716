#!/usr/bin/env bash
# bench_step.sh — predicting the WHOLE training step (walk + exposed gradient sync + optimizer,
# docs/simulator.md "The step"), not the walk, of the C executor at P x D = 2 x 1 and 1 x 2
# (one rank per core) and 2 x 2 (4 ranks on 2 cores: oversubscribed), and of the torch executor
# at 2 x 1, on examples/tiny-mllm.json (vpp 2, M 8), from a calibration of a SEPARATE run.
# Per configuration, REPS calibration runs and REPS measured runs, interleaved (torch: REPS x
# CAL_REPS_TORCH of each, since it traces its last step only and its runs drift apart by up to
# 30% here):
#   calibration run:  train ... --steps $STEPS --log cal.log --trace cal.json [--trace-from 2]
#   the table:        bigmac plan SPEC --pp P --dp D -o T      (the table `train` runs)
#   per step, expected (the prediction; docs/simulator.md "Predicting a run", "The step"):
#                     every traced step on its own (at dp > 1 its slowest replica, calibrate's
#                     default), with its op-time spread:
#                     bigmac calibrate cal.stepK.json --spec SPEC --mean --rank-scale --spread --step-log cal.log -o CAL
#                     bigmac simulate CAL --table T --json  -> expected_makespan_ms + (step_ms - makespan_ms)
#                     (the expected walk, then the exposed sync and the optimizer), the median over
#                     the steps
#   after the walk:   the same with every collective after the walk, one after another, as both
#                     executors run them: expected_makespan_ms + sync_total_ms + optimizer_ms
#                     (the simulator overlaps a chunk's reduction with the cooldown, Megatron's
#                     order; src/exec/run.c reduces every gradient after the walk)
#   pooled (as before): every trace in one calibration, --mean --rank-scale, simulate -> step_ms
#   measured run:     train ... --steps $STEPS --log meas.log  -> over steps 2.., the median of
#                     the step from its origin to the last rank's end (max over ranks of
#                     sync_end_ms + optimizer_ms: walk, collectives, AdamW; what step_ms
#                     predicts); the calibration runs' own median step beside it shows how far
#                     two runs of the same configuration drift apart on this machine, and the
#                     same-step error (the median over traced steps of each step's prediction
#                     over that very step's measured time) the model's error without that drift
# Printed: the rerun command, then a Markdown row per configuration with both predictions and
# their signed errors (predicted / measured - 1), the measured and the calibration runs' median
# step, the prediction's parts (expected walk, exposed sync, optimizer), the measured walk and
# tail (median over steps and ranks of sync_end - walk + optimizer_ms), and the machine's load
# average. Nothing is asserted. CONFIGS picks configurations (default
# 'c 2 1,c 1 2,torch 2 1,c 2 2'). About 15 s per configuration and REPS at STEPS=12 on 2 cores.
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
echo "| executor | P x D | predicted step ms (per step, expected) | error | the same, collectives after the walk | error | predicted step ms (pooled) | error | measured step ms (median) | calibration runs' step ms (median) | same-step error (median; overlapped / after the walk) | predicted walk (expected) / exposed sync (all sync) / optimizer ms | measured walk / sync+optimizer ms | load |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
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
def step_of(log, k):  # the measured step k of a log (origin to the last rank's end)
    for l in open(log):
        j = json.loads(l)
        if j["step"] == k:
            return max(r["sync_end_ms"] + r["optimizer_ms"] for r in j["ranks"])
def steps(paths):
    ms, walk, tail = [], [], []
    for path in paths:
        for l in open(path):
            j = json.loads(l)
            if j["step"] == 1:
                continue
            ms.append(max(r["sync_end_ms"] + r["optimizer_ms"] for r in j["ranks"]))
            walk.append(max(r["walk_ms"] for r in j["ranks"]))
            for r in j["ranks"]:
                tail.append(r["sync_end_ms"] - r["walk_ms"] + r["optimizer_ms"])
    return statistics.median(ms), statistics.median(walk), statistics.median(tail)
meas, mwalk, mtail = steps(meas_logs)
cal, _, _ = steps(cal_logs)
def exp_step(s):
    return s.get("expected_makespan_ms", s["makespan_ms"]) + s["step_ms"] - s["makespan_ms"]
per = statistics.median(exp_step(s) for s in sims)
pwalk = statistics.median(s.get("expected_makespan_ms", s["makespan_ms"]) for s in sims)
psync = statistics.median(s["sync_exposed_ms"] for s in sims)
popt = statistics.median(s["optimizer_ms"] for s in sims)
def exp_seq(s):  # the collectives after the walk, one after another, as both executors run them
    return s.get("expected_makespan_ms", s["makespan_ms"]) + s["sync_total_ms"] + s["optimizer_ms"]
pooled = sim["step_ms"]
same = statistics.median(exp_step(s) / step_of(r[1], int(r[2])) - 1 for s, r in zip(sims, rows))
seq = statistics.median(exp_seq(s) for s in sims)
same_seq = statistics.median(exp_seq(s) / step_of(r[1], int(r[2])) - 1 for s, r in zip(sims, rows))
ptot = statistics.median(s["sync_total_ms"] for s in sims)
print("| %s | %s | %.2f | %+.1f%% | %.2f | %+.1f%% | %.2f | %+.1f%% | %.2f | %.2f | %+.1f%% / %+.1f%% | %.2f / %.2f (%.2f) / %.2f | %.2f / %.2f | %s |" % (
    "C" if kind == "c" else "torch", layout, per, (per / meas - 1) * 100, seq, (seq / meas - 1) * 100,
    pooled, (pooled / meas - 1) * 100, meas, cal, same * 100, same_seq * 100, pwalk, psync, ptot, popt, mwalk, mtail, load))
PY
done

#!/usr/bin/env bash
# bench_step.sh — predicting the WHOLE training step (walk + exposed gradient sync + optimizer,
# docs/simulator.md "The step"), not the walk, of the C executor at P x D = 2 x 1 and 1 x 2
# (one rank per core) and 2 x 2 (4 ranks on 2 cores: oversubscribed), and of the torch executor
# at 2 x 1, on examples/tiny-mllm.json (vpp 2, M 8), from a calibration of a SEPARATE run.
# Per configuration:
#   calibration run:  train ... --steps $STEPS --log cal.log --trace cal.json [--trace-from 2]
#                     bigmac calibrate cal.step*.json --spec SPEC --mean --rank-scale --step-log cal.log -o CAL
#                     (the C executor traces every step from 2 and all are pooled; the torch
#                     executor traces its last step, so it has CAL_REPS_TORCH runs, default 3)
#                     (module costs, each rank's speed, dispatch, link latency from the trace;
#                     optimizer_ms_per_gib and the collectives' ring from the step log)
#   the table:        bigmac plan SPEC --pp P --dp D -o T      (the table `train` runs)
#   prediction:       bigmac simulate CAL --table T --json     -> step_ms (and its parts)
#   measured run:     train ... --steps $STEPS --log meas.log  -> over steps 2.., the median of
#                     the step from its origin to the last rank's end (max over ranks of
#                     sync_end_ms + optimizer_ms: walk, collectives, AdamW; what step_ms
#                     predicts), and of the log's "ms" (rank 0's wall time of the step, which also
#                     draws the step's data before the origin: a prefetching loader's work)
# Printed: a Markdown row per configuration with predicted and measured step, their ratio and
# the error with its sign (predicted / measured - 1), the prediction's parts (walk, exposed
# sync, optimizer), the measured tail (median over steps and ranks of sync_end - walk and of
# optimizer_ms), and the machine's load average. Nothing is asserted. REPS runs of each kind
# (default 1) pool their steps. Rerun on a quiet machine for the figures that count.
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

echo "priority: ${PRIO:-normal} (2 x 2: normal)"
echo "| executor | P x D | predicted step ms | measured step ms (median) | ratio | error | measured wall ms (median) | predicted walk / exposed sync / optimizer ms | measured sync+optimizer ms | load |"
echo "|---|---|---|---|---|---|---|---|---|---|"
IFS=, read -r -a CFGS <<<"${CONFIGS:-c 2 1,c 1 2,torch 2 1,c 2 2}"
for cfg in "${CFGS[@]}"; do
    set -- $cfg
    kind=$1 p=$2 d=$3 tag="$1_$2x$3"
    logs=() ; traces=() ; steps=()
    ok=1
    ncal=$REPS
    [ "$kind" = torch ] && ncal=${CAL_REPS_TORCH:-3}
    for r in $(seq 1 "$ncal"); do
        train $kind $p $d "$T/$tag.cal$r" || { ok=0; echo "bench_step: $tag calibration run failed" >&2; tail -3 "$T/$tag.cal$r.out" >&2; }
        logs+=("$T/$tag.cal$r.log")
        if [ "$kind" = c ]; then traces+=("$T/$tag.cal$r".step*.json); else traces+=("$T/$tag.cal$r.json"); fi
    done
    for r in $(seq 1 "$REPS"); do
        train $kind $p $d "$T/$tag.meas$r" || { ok=0; echo "bench_step: $tag measured run failed" >&2; tail -3 "$T/$tag.meas$r.out" >&2; }
        steps+=("$T/$tag.meas$r.log")
    done
    [ $ok = 1 ] || continue
    cat "${logs[@]}" >"$T/$tag.cal.log"
    "$BIGMAC" calibrate "${traces[@]}" --spec $SPEC --mean --rank-scale --step-log "$T/$tag.cal.log" -o "$T/$tag.cal.spec.json" \
        2>"$T/$tag.calib.err" || { echo "bench_step: $tag calibrate failed: $(cat "$T/$tag.calib.err")" >&2; continue; }
    "$BIGMAC" plan $SPEC --pp $p --dp $d -o "$T/$tag.table.json" >/dev/null
    "$BIGMAC" simulate "$T/$tag.cal.spec.json" --table "$T/$tag.table.json" --json >"$T/$tag.sim.json"
    "$PYTHON" - "$T/$tag.sim.json" "$kind" "$p x $d" "$(cut -d' ' -f1-3 /proc/loadavg)" "${steps[@]}" <<'PY'
import json, statistics, sys
sim = json.load(open(sys.argv[1]))
kind, layout, load, logs = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
ms, wall, tail = [], [], []
for path in logs:
    for l in open(path):
        j = json.loads(l)
        if j["step"] == 1:
            continue
        wall.append(j["ms"])
        ms.append(max(r["sync_end_ms"] + r["optimizer_ms"] for r in j["ranks"]))
        for r in j["ranks"]:
            tail.append(r["sync_end_ms"] - r["walk_ms"] + r["optimizer_ms"])
meas = statistics.median(ms)
pred = sim["step_ms"]
print("| %s | %s | %.2f | %.2f | %.3f | %+.1f%% | %.2f | %.2f / %.2f / %.2f | %.2f | %s |" % (
    "C" if kind == "c" else "torch", layout, pred, meas, pred / meas, (pred / meas - 1) * 100, statistics.median(wall),
    sim["makespan_ms"], sim["sync_exposed_ms"], sim["optimizer_ms"], statistics.median(tail), load))
PY
done

#!/usr/bin/env bash
# bench_exec.sh — the executor at P = 2 (one rank per core, no oversubscription):
#  1. bigmac, optimus and unified side by side on examples/tiny-mllm.json (interleaved V=2,
#     M=8): measured iteration time (median step wall time, all-reduce and AdamW included),
#     makespan (median over steps 4.. of all runs of the op walk, the longest rank's: the
#     progress line's "walk"), their ratios, the traced (last) step's makespan (median over the
#     runs), and the calibrated simulator's prediction of it.
#     The last step's prediction (the fifth session's procedure; docs/simulator.md "Predicting a
#     run" gives the average step's, below), one procedure for every policy:
#       bigmac calibrate <every bigmac run's trace> --spec SPEC --mean --run-median --rank-scale -o CAL
#       bigmac plan SPEC --policy P -o P.table             (the table `train` runs)
#       bigmac simulate CAL --table P.table --json         -> makespan_ms
#     i.e. every bigmac run's trace fitted on its own (means within the run: module costs,
#     per-microbatch encoder scales, each rank's speed, the per-op dispatch, the link latency
#     the transfers imply), the median over
#     the runs of every number, then the makespan of the table that ran. It is compared with
#     the traced step's measured makespan (median over the runs): the
#     step whose data (images per microbatch, which set the encoder and backbone op times) the
#     costs were measured on; the other steps draw other data (10-14 images per step here), so
#     the median walk over steps 4.. is a different workload (its error is printed too).
#     Also printed: the same with the op-time spread (`--spread`, simulate's expected_makespan_ms),
#     the pooled means of the earlier sessions (`--mean --rank-scale` without --run-median) on
#     the same table, and the former procedure, which plans again from that calibrated spec
#     (`simulate CAL --policy P`): with calibrated costs bigmac and optimus then plan another
#     table than the one that ran.
#     The average step (bench/RESULTS.md "Issue 16: predicting the average step" and "Issue 16:
#     the expected makespan"): every run also traces every step from TRACE_FROM (default 4;
#     `train --trace-from`), and five predictions of the median walk are printed, all from
#     bigmac's traces only; the last, per trace expected, is the prediction docs/simulator.md
#     "Predicting a run" gives:
#       per step: for each step K, `calibrate` of the runs' step-K traces as above (each step's
#         own data draw), simulate the table; the median over the steps of these predictions;
#       the same with the op-time spread (`--spread`, simulate's expected_makespan_ms);
#       pooled over steps: one `calibrate --run-median` of every traced step of every run;
#       per trace: every traced step of every run calibrated on its own (`--mean --rank-scale`)
#         and simulated, the median over all of them (built like the median walk: one value
#         per step and run, so the runs' and the steps' spread enter both alike);
#       per trace, expected: the same calibrated with `--spread` (op-time spread, dispatch
#         spread) and simulate's expected_makespan_ms: THE prediction.
#     Each against the median walk and against the median traced makespan (all traced steps of
#     all runs; the walk is printed in 0.1 ms), then each step's own prediction and error.
#  2. measured encoder activation peak (max over ranks, bytes) for bigmac and optimus at
#     M = 4, 8, 16, on tiny-mllm and on tests/specs/exec-small.json (whose nominal encoder cost
#     keeps optimus from parking encoder forwards in bubbles).
# Figures are printed as Markdown rows; nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BIGMAC:=bin/bigmac}"
: "${STEPS:=10}"
: "${REPS:=30}"
: "${TRACE_FROM:=4}"
: "${PYTHON:=/usr/bin/python3}"
export OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# On a shared machine other processes take the cores for scheduler slices at a time; running the
# ranks at real-time priority (SCHED_FIFO via chrt, root only) emulates dedicated cores. RT=0 turns
# it off. The ranks sleep while they wait for messages longer than 1 ms, so they never hog a core;
# mpirun itself stays at normal priority.
PRIO=""
if [ "${RT:-1}" = 1 ] && [ "$(id -u)" = 0 ] && command -v chrt >/dev/null; then PRIO="chrt -f 10"; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
SPEC=examples/tiny-mllm.json

median() { sort -g | awk '{v[NR]=$1} END{print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
# The median walk's 95% interval: the runs resampled with replacement (a run's steps stay
# together: a slow run is slow in all of them), the median over the resampled runs' steps, 2000
# times (seeded); prints "lo hi" in ms. On this VM one run's median walk differs from the next
# run's of the same policy by up to 30%, so two policies' medians differ by a few percent
# without any difference in their schedules.
walk_interval() {
    "$PYTHON" - "$1" <<'PY'
import random, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r, w = line.split()
    runs.setdefault(r, []).append(float(w))
keys, rng, meds = sorted(runs), random.Random(1), []
for _ in range(2000):
    pick = [rng.choice(keys) for _ in keys]
    meds.append(statistics.median([w for k in pick for w in runs[k]]))
meds.sort()
print(f"{meds[49]:.2f} {meds[1949]:.2f}")
PY
}
makespan_of() { "$BIGMAC" render "$1" --format ascii --width 60 | sed -n 's/^makespan \([0-9.]*\) ms.*/\1/p'; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; P=2, $STEPS steps x $REPS runs; ranks ${PRIO:-at normal priority}"
echo
echo "| policy | step ms (median) | step / bigmac | makespan ms (median walk) | makespan / bigmac | traced makespan ms (median) | last-step prediction ms (run-median) | error vs traced | error vs walk | with spread (expected) ms | error vs traced | pooled means ms | error vs traced | pooled, planned again (old) ms | error vs traced |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
declare -A STEP MK TR
for pol in bigmac optimus unified; do : >"$T/$pol.ms"; : >"$T/$pol.mk"; : >"$T/$pol.walk"; : >"$T/$pol.walkr"; done
# policies interleaved within each repetition, so a slow spell of the machine hits all of them
for rep in $(seq "$REPS"); do
    for pol in bigmac optimus unified; do
        timeout 300 mpirun -np 2 $PRIO "$BIGMAC" train $SPEC --pp 2 --unit 2 --policy $pol --steps "$STEPS" \
            --log "$T/$pol.log" --trace "$T/$pol.$rep.json" --trace-from "$TRACE_FROM" >"$T/progress"
        sed -n 's/^step *\([0-9]*\)\/.* cpu \([0-9]*\)%.*/\1 \2/p' "$T/progress" | awk '$1 > 3 {print $2}' >>"$T/cpu"
        sed -n 's/^step *\([0-9]*\)\/.* walk \([0-9.]*\) ms.*/\1 \2/p' "$T/progress" |
            awk -v r="$rep" '$1 > 3 {print $2; print r, $2 >"/dev/stderr"}' >>"$T/$pol.walk" 2>>"$T/$pol.walkr"
        tail -n +4 "$T/$pol.log" | sed 's/.*"ms": \([0-9.]*\).*/\1/' >>"$T/$pol.ms"
        echo "$(makespan_of "$T/$pol.$rep.json") $rep" >>"$T/$pol.mk"
    done
done
LAST=$(for rep in $(seq "$REPS"); do echo "$T/bigmac.$rep.json"; done) # bigmac's last-step traces
for pol in bigmac optimus unified; do
    STEP[$pol]=$(median <"$T/$pol.ms")
    MK[$pol]=$(median <"$T/$pol.walk")
    TR[$pol]=$(cut -d' ' -f1 "$T/$pol.mk" | median)
done
# The last step's calibration: every bigmac run's trace on its own (means within the run, each rank's speed),
# the median over the runs of every number; the same with the op-time spread; the earlier
# sessions' pooled means (all runs' durations in one mean per slot)
# (stderr: calibrate warns here that the tensors' nominal out_mib overstate them)
"$BIGMAC" calibrate $LAST --spec $SPEC --mean --run-median --rank-scale -o "$T/cal.json" 2>"$T/cal.err"
"$BIGMAC" calibrate $LAST --spec $SPEC --mean --run-median --rank-scale --spread -o "$T/cal_spread.json" 2>/dev/null
"$BIGMAC" calibrate $LAST --spec $SPEC --mean --rank-scale -o "$T/cal_pooled.json" 2>/dev/null
pred_of() { # simulate --json output -> the expected makespan, or the plain one without spread
    local v
    v=$(sed -n 's/.*"expected_makespan_ms": \([0-9.e+-]*\).*/\1/p' "$1")
    [ -n "$v" ] || v=$(sed -n 's/^  "makespan_ms": \([0-9.e+-]*\).*/\1/p' "$1")
    echo "$v"
}
err() { awk -v m="$1" -v pr="$2" 'BEGIN{printf "%+.1f%%", (pr-m)/m*100}'; }
for pol in bigmac optimus unified; do
    row=$(awk -v p=$pol -v s="${STEP[$pol]}" -v m="${MK[$pol]}" -v b="${STEP[bigmac]}" -v mb="${MK[bigmac]}" \
        -v tr="${TR[$pol]}" 'BEGIN{printf "| %s | %.2f | %.3f | %.2f | %.3f | %.2f", p, s, s/b, m, m/mb, tr}')
    # the table train runs: planned from the spec as train plans it
    "$BIGMAC" plan $SPEC --pp 2 --unit 2 --policy $pol -o "$T/table.$pol.json" >/dev/null
    "$BIGMAC" simulate "$T/cal.json" --table "$T/table.$pol.json" --json >"$T/pred.json"
    pred=$(pred_of "$T/pred.json")
    row="$row | $(printf %.2f "$pred") | $(err "${TR[$pol]}" "$pred") | $(err "${MK[$pol]}" "$pred")"
    for cal in cal_spread cal_pooled; do
        "$BIGMAC" simulate "$T/$cal.json" --table "$T/table.$pol.json" --json >"$T/pred.json"
        pred=$(pred_of "$T/pred.json")
        row="$row | $(printf %.2f "$pred") | $(err "${TR[$pol]}" "$pred")"
    done
    "$BIGMAC" simulate "$T/cal_pooled.json" --pp 2 --unit 2 --policy $pol --json >"$T/pred.json" 2>/dev/null
    pred=$(pred_of "$T/pred.json")
    row="$row | $(printf %.2f "$pred") | $(err "${TR[$pol]}" "$pred")"
    echo "$row |"
done
# The average step: per step K (each step's own data), and pooled over every traced step
echo
echo "Average step (steps $TRACE_FROM..$STEPS, every step traced; from bigmac's traces):"
echo
echo "| policy | makespan ms (median walk) | its 95% interval (runs resampled) | traced makespan ms (median, all traced steps) | per-step predictions, median ms | error vs walk | error vs traced | per-step with spread (expected), median ms | error vs walk | error vs traced | pooled over steps ms | error vs walk | error vs traced | per trace, median ms | error vs walk | error vs traced | **per trace, expected (--spread), median ms** | **error vs walk** | error vs traced |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
ALL=$(for rep in $(seq "$REPS"); do for k in $(seq "$TRACE_FROM" "$STEPS"); do echo "$T/bigmac.$rep.step$k.json"; done; done)
"$BIGMAC" calibrate $ALL --spec $SPEC --mean --run-median --rank-scale -o "$T/cal_steps.json" 2>/dev/null
for k in $(seq "$TRACE_FROM" "$STEPS"); do
    KT=$(for rep in $(seq "$REPS"); do echo "$T/bigmac.$rep.step$k.json"; done)
    "$BIGMAC" calibrate $KT --spec $SPEC --mean --run-median --rank-scale -o "$T/cal_step$k.json" 2>/dev/null
    "$BIGMAC" calibrate $KT --spec $SPEC --mean --run-median --rank-scale --spread -o "$T/cal_spread_step$k.json" 2>/dev/null
done
: >"$T/steprows"
# per trace: every traced step of every run calibrated on its own (its means, scales, dispatch)
# per trace, expected: the same with --spread (op-time and dispatch spreads), simulate's
# expected makespan
for f in $ALL; do
    "$BIGMAC" calibrate "$f" --spec $SPEC --mean --rank-scale -o "${f%.json}.cal" 2>/dev/null
    "$BIGMAC" calibrate "$f" --spec $SPEC --mean --rank-scale --spread -o "${f%.json}.scal" 2>/dev/null
done
for pol in bigmac optimus unified; do
    : >"$T/$pol.kpred"; : >"$T/$pol.kspread"
    for k in $(seq "$TRACE_FROM" "$STEPS"); do
        "$BIGMAC" simulate "$T/cal_step$k.json" --table "$T/table.$pol.json" --json >"$T/pred.json"
        pk=$(pred_of "$T/pred.json")
        echo "$pk" >>"$T/$pol.kpred"
        "$BIGMAC" simulate "$T/cal_spread_step$k.json" --table "$T/table.$pol.json" --json >"$T/pred.json"
        pred_of "$T/pred.json" >>"$T/$pol.kspread"
        tk=$(for rep in $(seq "$REPS"); do makespan_of "$T/$pol.$rep.step$k.json"; done | tee -a "$T/$pol.trall" | median)
        echo "| $k | $pol | $(printf %.2f "$tk") | $(printf %.2f "$pk") | $(err "$tk" "$pk") |" >>"$T/steprows"
    done
    for f in $ALL; do
        "$BIGMAC" simulate "${f%.json}.cal" --table "$T/table.$pol.json" --json >"$T/pred.json"
        pred_of "$T/pred.json"
    done >"$T/$pol.tpred"
    for f in $ALL; do
        "$BIGMAC" simulate "${f%.json}.scal" --table "$T/table.$pol.json" --json >"$T/pred.json"
        pred_of "$T/pred.json"
    done >"$T/$pol.tspred"
    pt=$(median <"$T/$pol.tpred") pe=$(median <"$T/$pol.tspred")
    trall=$(median <"$T/$pol.trall")
    pm=$(median <"$T/$pol.kpred") ps=$(median <"$T/$pol.kspread")
    "$BIGMAC" simulate "$T/cal_steps.json" --table "$T/table.$pol.json" --json >"$T/pred.json"
    pp=$(pred_of "$T/pred.json")
    read -r wlo whi < <(walk_interval "$T/$pol.walkr")
    echo "| $pol | $(printf %.2f "${MK[$pol]}") | $wlo-$whi ($(err "${MK[$pol]}" "$wlo")..$(err "${MK[$pol]}" "$whi")) | $(printf %.2f "$trall") | $(printf %.2f "$pm") | $(err "${MK[$pol]}" "$pm") |" \
         "$(err "$trall" "$pm") | $(printf %.2f "$ps") | $(err "${MK[$pol]}" "$ps") | $(err "$trall" "$ps")" \
         "| $(printf %.2f "$pp") | $(err "${MK[$pol]}" "$pp") | $(err "$trall" "$pp")" \
         "| $(printf %.2f "$pt") | $(err "${MK[$pol]}" "$pt") | $(err "$trall" "$pt")" \
         "| **$(printf %.2f "$pe")** | **$(err "${MK[$pol]}" "$pe")** | $(err "$trall" "$pe") |"
done
echo
echo "| step | policy | traced makespan ms (median over runs) | prediction from the step's traces ms | error |"
echo "|---|---|---|---|---|"
sort -s -n -k2,2 "$T/steprows"
echo
echo "CPU share: the ranks' processes were on a CPU $(median <"$T/cpu")% of their steps' wall time (median; load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
sed 's/^/calibrate: /' "$T/cal.err"
echo "calibrated costs (the last step's calibration: median over bigmac's runs of the per-run means):"
"$BIGMAC" calibrate $LAST --mean --run-median --rank-scale 2>/dev/null | sed '/"traces"/,/\]/d; /"trace":/d' | tr -d ' \n' |
    sed 's/},{/},\n  {/g; s/$/\n/'
echo
echo "| spec | policy | M=4 | M=8 | M=16 | (encoder peak bytes, max over ranks) |"
echo "|---|---|---|---|---|---|"
for spec in $SPEC tests/specs/exec-small.json; do
    extra=""
    [ $spec = tests/specs/exec-small.json ] && extra="--backbone 1f1b --vpp 1"
    for pol in bigmac optimus; do
        row="| $(basename $spec .json) | $pol"
        for M in 4 8 16; do
            timeout 300 mpirun -np 2 "$BIGMAC" train $spec --pp 2 $extra --policy $pol --microbatches $M --steps 1 --quiet \
                --log "$T/mem.log"
            pk=$(grep -o '"encoder": [0-9]*' "$T/mem.log" | awk '{if($2>m)m=$2} END{print m}')
            row="$row | $pk"
        done
        echo "$row | |"
    done
done

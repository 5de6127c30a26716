#!/usr/bin/env bash
# bench_exec.sh — the executor at P = 2 (one rank per core, no oversubscription):
#  1. bigmac, optimus and unified side by side on examples/tiny-mllm.json (interleaved V=2,
#     M=8): measured iteration time (median step wall time, all-reduce and AdamW included),
#     makespan (median over steps 4.. of all runs of the op walk, the longest rank's: the
#     progress line's "walk"), their ratios, and the calibrated simulator's prediction of the
#     makespan (costs calibrated once, medians and means, from the last-step trace of bigmac's
#     run with the median traced makespan; means pooled over the last-step traces of all of
#     bigmac's runs; and the same with each rank's measured speed, `calibrate --rank-scale`).
#     Every calibration also fits the per-op dispatch time (device.op_overhead_us), the
#     per-microbatch encoder multipliers (data.encoder_cost_scale {"values"}) from the traces.
#     The last prediction also fits each module's op-time spread (`calibrate --spread`) and
#     takes `simulate --json`'s expected_makespan_ms (the mean over 32 draws of the op times).
#  2. measured encoder activation peak (max over ranks, bytes) for bigmac and optimus at
#     M = 4, 8, 16, on tiny-mllm and on tests/specs/exec-small.json (whose nominal encoder cost
#     keeps optimus from parking encoder forwards in bubbles).
# Figures are printed as Markdown rows; nothing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BIGMAC:=bin/bigmac}"
: "${STEPS:=10}"
: "${REPS:=15}"
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
makespan_of() { "$BIGMAC" render "$1" --format ascii --width 60 | sed -n 's/^makespan \([0-9.]*\) ms.*/\1/p'; }

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; P=2, $STEPS steps x $REPS runs; ranks ${PRIO:-at normal priority}"
echo
echo "| policy | step ms (median) | step / bigmac | makespan ms (median walk) | makespan / bigmac | traced makespan ms (median) | predicted ms (median costs) | error | predicted ms (mean costs) | error | predicted ms (mean costs, all runs) | error | error vs traced | predicted ms (all runs + rank scale) | error | error vs traced | expected ms (all runs + rank scale + spread) | error | error vs traced |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
declare -A STEP MK TR BEST
for pol in bigmac optimus unified; do : >"$T/$pol.ms"; : >"$T/$pol.mk"; : >"$T/$pol.walk"; done
# policies interleaved within each repetition, so a slow spell of the machine hits all of them
for rep in $(seq "$REPS"); do
    for pol in bigmac optimus unified; do
        timeout 300 mpirun -np 2 $PRIO "$BIGMAC" train $SPEC --pp 2 --unit 2 --policy $pol --steps "$STEPS" \
            --log "$T/$pol.log" --trace "$T/$pol.$rep.json" >"$T/progress"
        sed -n 's/^step *\([0-9]*\)\/.* cpu \([0-9]*\)%.*/\1 \2/p' "$T/progress" | awk '$1 > 3 {print $2}' >>"$T/cpu"
        sed -n 's/^step *\([0-9]*\)\/.* walk \([0-9.]*\) ms.*/\1 \2/p' "$T/progress" | awk '$1 > 3 {print $2}' >>"$T/$pol.walk"
        tail -n +4 "$T/$pol.log" | sed 's/.*"ms": \([0-9.]*\).*/\1/' >>"$T/$pol.ms"
        echo "$(makespan_of "$T/$pol.$rep.json") $rep" >>"$T/$pol.mk"
    done
done
for pol in bigmac optimus unified; do
    STEP[$pol]=$(median <"$T/$pol.ms")
    MK[$pol]=$(median <"$T/$pol.walk")
    TR[$pol]=$(cut -d' ' -f1 "$T/$pol.mk" | median)
    # calibrate from the run whose traced makespan is the median of the REPS runs
    read -r _ best < <(sort -g "$T/$pol.mk" | sed -n "$(( (REPS + 1) / 2 ))p")
    BEST[$pol]="$T/$pol.$best.json"
done
"$BIGMAC" calibrate "${BEST[bigmac]}" --spec $SPEC -o "$T/cal_median.json"
"$BIGMAC" calibrate "${BEST[bigmac]}" --spec $SPEC --mean -o "$T/cal_mean.json"
# pooled: every bigmac run's trace (the machine's speed drifts from run to run)
"$BIGMAC" calibrate "$T"/bigmac.*.json --spec $SPEC --mean -o "$T/cal_pooled.json"
# and each rank's measured speed (device.rank_time_scale): the ranks need not run at one speed
"$BIGMAC" calibrate "$T"/bigmac.*.json --spec $SPEC --mean --rank-scale -o "$T/cal_ranks.json"
# and the op-to-op spread of the op times (a makespan is a max-plus sum: longer under noise)
"$BIGMAC" calibrate "$T"/bigmac.*.json --spec $SPEC --mean --rank-scale --spread -o "$T/cal_spread.json"
for pol in bigmac optimus unified; do
    row=$(awk -v p=$pol -v s="${STEP[$pol]}" -v m="${MK[$pol]}" -v b="${STEP[bigmac]}" -v mb="${MK[bigmac]}" \
        -v tr="${TR[$pol]}" 'BEGIN{printf "| %s | %.2f | %.3f | %.2f | %.3f | %.2f", p, s, s/b, m, m/mb, tr}')
    for stat in median mean pooled ranks spread; do
        # the expected makespan under the calibrated op-time spread (`simulate --json`), the
        # plain simulated makespan for a spec without spread
        "$BIGMAC" simulate "$T/cal_$stat.json" --pp 2 --unit 2 --policy $pol --json >"$T/pred.json" 2>/dev/null
        pred=$(sed -n 's/.*"expected_makespan_ms": \([0-9.e+-]*\).*/\1/p' "$T/pred.json")
        [ -n "$pred" ] || pred=$(sed -n 's/^  "makespan_ms": \([0-9.e+-]*\).*/\1/p' "$T/pred.json")
        row="$row$(awk -v m="${MK[$pol]}" -v pr="$pred" 'BEGIN{printf " | %.2f | %+.1f%%", pr, (pr-m)/m*100}')"
        # the all-runs predictions also against the traced steps themselves (the steps the costs
        # came from, for bigmac; the same runs' last steps for the others): no step-to-step drift
        if [ $stat = pooled ] || [ $stat = ranks ] || [ $stat = spread ]; then
            row="$row$(awk -v m="${TR[$pol]}" -v pr="$pred" 'BEGIN{printf " | %+.1f%%", (pr-m)/m*100}')"
        fi
    done
    echo "$row |"
done
echo
echo "CPU share: the ranks' processes were on a CPU $(median <"$T/cpu")% of their steps' wall time (median; load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "calibrated costs (from bigmac's median trace):"
"$BIGMAC" calibrate "${BEST[bigmac]}" | tr -d ' \n' | sed 's/},{/},\n  {/g; s/$/\n/'
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

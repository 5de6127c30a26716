#!/usr/bin/env bash
# bench_multihost.sh — what the link between hosts costs tiny-mllm at P = 4 (1f1b, bigmac,
# M = 8): the median step wall time and op-walk makespan ("walk" of the progress line) over
# STEPS steps (the first dropped) x REPS runs, for
#   one host, shared memory  mpirun -np 4 (btl vader between all ranks)
#   one host, TCP            the same with --mca btl tcp,self (loopback TCP between all ranks)
#   two hosts                tests/netns.sh: ranks 0-1 and 2-3 in two network namespaces, TCP
#                            over a veth between them, shared memory inside each (the hop 1 -> 2
#                            and the gradient all-reduce cross)
# Runs are interleaved per repetition, so a slow spell of the shared machine hits all three.
# Root only for the two-host row (otherwise it says so). Figures are printed, never asserted.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${BIGMAC:=bin/bigmac}"
: "${STEPS:=21}"
: "${REPS:=5}"
export OPENBLAS_NUM_THREADS=1 OMPI_MCA_rmaps_base_oversubscribe=1 ASAN_OPTIONS=
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
command -v mpirun >/dev/null || { echo "bench_multihost: no mpirun, nothing to measure"; exit 0; }
T=$(mktemp -d)
SPEC=examples/tiny-mllm.json
BIN=$(cd "$(dirname "$BIGMAC")" && pwd)/$(basename "$BIGMAC")
. tests/netns.sh
netns_up "$T"
up=$?
trap 'netns_down; rm -rf "$T"' EXIT
[ $up = 0 ] || echo "bench_multihost: no two-host row: $NETNS_WHY"

median() { sort -g | awk '{v[NR]=$1} END{print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
ARGS=(train $SPEC --pp 4 --vpp 1 --backbone 1f1b --policy bigmac --steps $STEPS)
run() { # run NAME CMD... : append the steps' ms and walk ms (first step dropped)
    local name=$1; shift
    "$@" >"$T/out" 2>&1 || { echo "bench_multihost: $name failed:"; tail -3 "$T/out"; return; }
    sed -n 's/^step *\([0-9]*\)\/.*ms min\/avg\/max [0-9.]*\/[0-9.]*\/\([0-9.]*\)  walk \([0-9.]*\) ms.*/\1 \2 \3/p' "$T/out" |
        awk '$1 > 1 {print $2 > "'"$T/$name.ms"'"; print $3 > "'"$T/$name.walk"'"}'
    cat "$T/$name.ms" >>"$T/$name.all.ms"; cat "$T/$name.walk" >>"$T/$name.all.walk"
}
for _ in $(seq "$REPS"); do
    run shm timeout 120 mpirun -np 4 --mca pml ob1 --mca btl vader,self "$BIN" "${ARGS[@]}"
    run tcp timeout 120 mpirun -np 4 --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo "$BIN" "${ARGS[@]}"
    [ $up = 0 ] && run hosts mh "$BIN" "${ARGS[@]}"
done
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; P=4 (oversubscribed), $((STEPS - 1)) steps x $REPS runs"
echo
echo "| placement | step ms (median) | walk ms (median) | steps |"
echo "|---|---|---|---|"
for row in "shm:one host, shared memory" "tcp:one host, TCP (loopback)" "hosts:two hosts (namespaces), TCP over veth"; do
    k=${row%%:*}
    [ -s "$T/$k.all.ms" ] || continue
    echo "| ${row#*:} | $(median <"$T/$k.all.ms") | $(median <"$T/$k.all.walk") | $(wc -l <"$T/$k.all.ms") |"
done

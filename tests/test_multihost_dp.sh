#!/usr/bin/env bash
# test_multihost_dp.sh — data parallel x pipeline parallel over two "hosts" (issue 23), made of
# network namespaces as in tests/test_multihost.sh (tests/netns.sh: bmhost-a and bmhost-b, two
# slots each, TCP on a veth between them only). tiny-mllm at pp 2 x dp 2 (global rank p*2 + d):
#
#   1. each stage's replicas on one host (`--map-by slot`: global ranks 0-1 = pp 0 on bmhost-a,
#      2-3 = pp 1 on bmhost-b; `--ranks-per-host 2` tells the planner): the data-parallel
#      all-reduce stays inside a host, the pipeline's activations cross;
#   2. each replica on one host (`--map-by node`: global ranks 0, 2 = replica 0 on bmhost-a, 1, 3
#      = replica 1 on bmhost-b; no placement needed, each pipeline is on one host): the pipeline
#      stays inside a host, the gradient all-reduce crosses;
#
# both against `train --reference --dp 2` (losses and parameters within 1e-4), their traces
# render, and rank 0 warns about the placement in neither. Not root, no `ip`, or namespaces
# refused: one SKIP line; a FAIL with BIGMAC_REQUIRE_NETNS=1.
# suite: waits (tests/run.sh runs it in the lane beside the others: its time is spent waiting)
cd "$(dirname "$0")/.."
. tests/lib.sh
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
SPEC=examples/tiny-mllm.json
STEPS=3
T=$TEST_TMP/multihost_dp
mkdir -p "$T"
BIN=$(cd "$(dirname "$BIGMAC")" && pwd)/$(basename "$BIGMAC") # the daemons start elsewhere

skip() { # skip WHY : this machine cannot run the test
    if [ "${BIGMAC_REQUIRE_NETNS:-0}" = 1 ]; then echo "FAIL multihost_dp: $1 (BIGMAC_REQUIRE_NETNS=1)"; exit 1; fi
    echo "SKIP multihost_dp: $1"; exit 0
}
command -v mpirun >/dev/null || skip "no mpirun"
. tests/netns.sh
netns_up "$T"
case $? in
    2) skip "$NETNS_WHY" ;;
    1) echo "FAIL multihost_dp_setup: $NETNS_WHY"; exit 1 ;;
esac

mhm() { # mhm MAP ARGS... : tests/netns.sh's mh with the rank mapping MAP (slot or node)
    local map=$1; shift
    timeout 90 ip netns exec $NSA mpirun --hostfile "$NETNS_DIR/hosts" -np 4 --map-by "$map" \
        --mca plm_rsh_agent "$NETNS_DIR/launch.sh" --mca plm_rsh_no_tree_spawn 1 \
        --mca pml ob1 --mca btl tcp,vader,self \
        --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
        -x OPENBLAS_NUM_THREADS -x ASAN_OPTIONS "$@"
}

"$BIGMAC" train $SPEC --reference --dp 2 --steps $STEPS --log "$T/ref.log" --dump-params "$T/ref.bin" >/dev/null 2>&1 ||
    echo "FAIL multihost_dp_reference_run"

# where each global rank lands under each mapping
where() { # where MAP : "rank G HOST" lines, sorted
    mhm "$1" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK $(hostname)"' 2>&1 | grep '^rank ' | sort
}
if [ "$(where slot)" = "$(printf 'rank 0 bmhost-a\nrank 1 bmhost-a\nrank 2 bmhost-b\nrank 3 bmhost-b')" ]; then
    echo "PASS multihost_dp_slot_stages_on_hosts"; else echo "FAIL multihost_dp_slot_stages_on_hosts"; fi
if [ "$(where node)" = "$(printf 'rank 0 bmhost-a\nrank 1 bmhost-b\nrank 2 bmhost-a\nrank 3 bmhost-b')" ]; then
    echo "PASS multihost_dp_node_replicas_on_hosts"; else echo "FAIL multihost_dp_node_replicas_on_hosts"; fi

for run in "dp_inside_host slot --ranks-per-host 2" "dp_across_hosts node"; do
    set -- $run
    n=$1 map=$2
    shift 2
    if mhm $map "$BIN" train $SPEC --pp 2 --dp 2 "$@" --steps $STEPS --quiet --log "$T/$n.log" \
          --dump-params "$T/$n.bin" --trace "$T/$n.trace.json" >"$T/$n.out" 2>&1; then
        losses_match "multihost_${n}_losses_match_reference" "$T/$n.log" "$T/ref.log"
        params_match "multihost_${n}_params_match_reference" "$T/$n.bin" "$T/ref.bin"
        expect_exit "multihost_${n}_trace_renders" 0 "$BIGMAC" render "$T/$n.trace.json" --format ascii
        expect_contains "multihost_${n}_trace_is_measured" "measured timeline"
        if [ "$(grep -c '"process_name","args":{"name":"pp [01] / dp [01]"}' "$T/$n.trace.json")" = 4 ]; then
            echo "PASS multihost_${n}_trace_has_every_rank"; else echo "FAIL multihost_${n}_trace_has_every_rank"; fi
        if grep -q "warning" "$T/$n.out"; then
            echo "FAIL multihost_${n}_placement_matches: $(grep warning "$T/$n.out")"
        else
            echo "PASS multihost_${n}_placement_matches"
        fi
    else
        echo "FAIL multihost_run_$n"; tail -8 "$T/$n.out" | sed 's/^/    /'
    fi
done
# the simulator agrees on what crosses: with the replicas of a stage on one host (2 per host,
# global rank p*2 + d) every pipeline hop does; across hosts (one pipeline per host) none does
expect_exit multihost_dp_simulate_inside 0 "$BIGMAC" simulate $SPEC --pp 2 --dp 2 --ranks-per-host 2
expect_contains multihost_dp_simulate_inside_crossing "hosts 2 (2 ranks per host"
if printf '%s\n' "$OUT_TXT" | grep -Eq '(^| )([0-9]+) of \2 transfers cross hosts'; then
    echo "PASS multihost_dp_simulate_inside_every_hop"; else echo "FAIL multihost_dp_simulate_inside_every_hop"; fi

netns_down
if ip netns list | grep -q "^bmmh$$[ab]\b"; then echo "FAIL multihost_dp_namespaces_removed"; else
    echo "PASS multihost_dp_namespaces_removed"; fi

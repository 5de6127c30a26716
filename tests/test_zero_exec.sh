# test_zero_exec.sh — the C executor under ZeRO-1 (`train --zero 1`, src/exec/run.c): each rank
# updates its shard of every instance's optimizer state and the weights are gathered, so the run
# equals the ZeRO-0 run bit for bit and the reference within 1e-4 (pp 1 x dp 2, pp 2 x dp 2,
# --local pp 2); the optimizer state a rank updates (the log's optimizer_state_bytes) is its
# shard: at pp 1 x dp 2 half the whole model's moments, what the simulator's ZeRO-1 memory model
# gives (src/sim/step.h) for a spec whose weights are the model's (the parameter dump's bytes);
# checkpoints under ZeRO-1 are refused.
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
SPEC=examples/tiny-mllm.json
PY=/usr/bin/python3
T=$TEST_TMP/zero_exec
mkdir -p "$T"
STEPS=3

# run NAME NP ARGS...: train under mpirun -np NP (NP 0: no mpirun) with a log and a dump
run() {
    local name=$1 np=$2; shift 2
    if [ "$np" = 0 ]; then timeout 120 "$BIGMAC" train $SPEC --steps $STEPS --quiet --log "$T/$name.log" \
        --dump-params "$T/$name.bin" "$@" >"$T/$name.out" 2>&1
    else timeout 120 mpirun -np "$np" "$BIGMAC" train $SPEC --steps $STEPS --quiet --log "$T/$name.log" \
        --dump-params "$T/$name.bin" "$@" >"$T/$name.out" 2>&1; fi || {
        echo "FAIL zero_run_$name: exit $?"; sed 's/^/    /' "$T/$name.out" | head; }
}
same() { if cmp -s "$T/$2.bin" "$T/$3.bin"; then echo "PASS $1"; else echo "FAIL $1: $2 and $3 differ"; fi; }

run ref_dp2 0 --reference --dp 2
run z0_11 2 --pp 1 --dp 2 --zero 0
run z1_11 2 --pp 1 --dp 2 --zero 1
same zero1_equals_zero0_pp1_dp2 z0_11 z1_11
params_match zero1_equals_reference_pp1_dp2 "$T/z1_11.bin" "$T/ref_dp2.bin"
losses_match zero1_losses_reference_pp1_dp2 "$T/z1_11.log" "$T/ref_dp2.log"
run z0_22 4 --pp 2 --dp 2 --zero 0
run z1_22 4 --pp 2 --dp 2 --zero 1
same zero1_equals_zero0_pp2_dp2 z0_22 z1_22
params_match zero1_equals_reference_pp2_dp2 "$T/z1_22.bin" "$T/ref_dp2.bin"
run ref 0 --reference
run z0_l 0 --local --pp 2 --zero 0
run z1_l 0 --local --pp 2 --zero 1
same zero1_equals_zero0_local_pp2 z0_l z1_l
params_match zero1_equals_reference_local_pp2 "$T/z1_l.bin" "$T/ref.bin"

# the measured shard against the simulator: a copy of the spec whose backbone holds the whole
# model's weights (the dump's bytes; every other module none) and 16 bytes of state per weight
$PY - "$SPEC" "$T/z1_11.bin" "$T/bytes.json" <<'EOF'
import json, os, sys
j = json.load(open(sys.argv[1]))
w = os.path.getsize(sys.argv[2]) / 2**20
for m in j["modules"]:
    bb = m.get("role") == "backbone" or m["name"] == "gpt"
    m.setdefault("cost", {})
    m["cost"]["param_mib"] = w if bb else 0
    m["cost"]["state_mib"] = 4 * w if bb else 0
json.dump(j, open(sys.argv[3], "w"))
EOF
for z in 0 1; do
    sim=$("$BIGMAC" simulate "$T/bytes.json" --pp 1 --dp 2 --zero $z --json |
          $PY -c 'import json,sys; print("%.0f" % (json.load(sys.stdin)["ranks"][0]["optimizer_state_gib"] * 2**30))')
    got=$($PY -c 'import json,sys; print(" ".join(sorted({"%.0f" % r["optimizer_state_bytes"] for l in open(sys.argv[1]) for r in json.loads(l)["ranks"]})))' "$T/z${z}_11.log")
    [ -n "$sim" ] && [ "$got" = "$sim" ] && echo "PASS zero${z}_optimizer_bytes_equal_simulator" ||
        echo "FAIL zero${z}_optimizer_bytes_equal_simulator: measured '$got', simulated '$sim'"
done

expect_exit zero1_checkpoint_refused 1 timeout 60 "$BIGMAC" train $SPEC --local --pp 2 --steps 1 --zero 1 --checkpoint "$T/ck"
expect_contains zero1_checkpoint_says "ZeRO-1) with checkpoints: not supported yet"

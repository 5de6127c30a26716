# test_zero_exec.sh — the C executor under ZeRO-1 (`train --zero 1`, src/exec/run.c, exec.c
# make_inst): the gradients are reduce-scattered, each rank allocates and updates only its shard
# of every instance's optimizer state (a replicated module's over every rank of the job, a
# backbone chunk's over its D replicas), and the weights are all-gathered, so
#   * the run equals the ZeRO-0 run (bit for bit with two-rank groups, within 1e-4 at pp 2 x
#     dp 2) and the reference within 1e-4 (pp 1 x dp 2, pp 2 x dp 1, pp 2 x dp 2, --local pp 2);
#   * the step log names what ran: a reduce_scatter of the gradients and an all_gather of the
#     weights per sharded instance;
#   * the optimizer state each rank holds (the log's optimizer_state_bytes: what it allocated)
#     equals the simulator's ZeRO-1 memory model (src/sim/step.h) per rank, at 2 x 2, 2 x 1 and
#     1 x 2, for the planned table given the model's real sizes: each module's weights from
#     bigmac.module_init (the C modules' own parameter counts, an independent reference) and the
#     backbone's chunk weights from the real parameters of each chunk's layers;
#   * a frozen module ("trainable": false) allocates no moments (ZeRO 0 and 1);
#   * checkpoints under ZeRO-1: every rank saves its shard (rank-R.dp-d.ckpt with dp > 1), and
#     --resume equals the uninterrupted run (losses and final parameters bit for bit); a ZeRO-0
#     set resumes under ZeRO-1 (each rank takes its shard of the whole moments); a ZeRO-1 set
#     under another zero or dp is refused, naming both.
# suite: waits (tests/run.sh runs it in the lane beside the others: its time is spent waiting)
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
SPEC=examples/tiny-mllm.json
PY=/usr/bin/python3
T=$TEST_TMP/zero_exec
rm -rf "$T"
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
same() { if [ -s "$T/$2.bin" ] && cmp -s "$T/$2.bin" "$T/$3.bin"; then echo "PASS $1"; else echo "FAIL $1: $2 and $3 differ"; fi; }
losses_of() { sed 's/.*"loss": \([^,]*\),.*/\1/' "$1" | tr '\n' ' '; }

run ref_dp2 0 --reference --dp 2
run z0_11 2 --pp 1 --dp 2 --zero 0
run z1_11 2 --pp 1 --dp 2 --zero 1
same zero1_equals_zero0_pp1_dp2 z0_11 z1_11
params_match zero1_equals_reference_pp1_dp2 "$T/z1_11.bin" "$T/ref_dp2.bin"
losses_match zero1_losses_reference_pp1_dp2 "$T/z1_11.log" "$T/ref_dp2.log"
run z0_22 4 --pp 2 --dp 2 --zero 0
run z1_22 4 --pp 2 --dp 2 --zero 1
# (4 ranks: the reduce-scatter may add a world group's four gradients in another order than the
# all-reduce does, so equal within float tolerance; two ranks' sums are exact either way)
params_match zero1_equals_zero0_pp2_dp2 "$T/z1_22.bin" "$T/z0_22.bin"
params_match zero1_equals_reference_pp2_dp2 "$T/z1_22.bin" "$T/ref_dp2.bin"
run ref 0 --reference
run z0_21 2 --pp 2 --zero 0
run z1_21 2 --pp 2 --zero 1
same zero1_equals_zero0_pp2_dp1 z0_21 z1_21
params_match zero1_equals_reference_pp2_dp1 "$T/z1_21.bin" "$T/ref.bin"
run z0_l 0 --local --pp 2 --zero 0
run z1_l 0 --local --pp 2 --zero 1
same zero1_equals_zero0_local_pp2 z0_l z1_l
params_match zero1_equals_reference_local_pp2 "$T/z1_l.bin" "$T/ref.bin"

# the log's collectives at pp 2 x dp 2: per instance a reduce_scatter of its gradients and an
# all_gather of its weights, each over the instance's group
$PY - "$T/z1_22.log" <<'PYEOF'
import json, sys
ok, why = True, ""
for l in open(sys.argv[1]):
    for r in json.loads(l)["ranks"]:
        got = sorted((c["op"], c["of"], c["module"], c["group"], c["ranks"]) for c in r["collectives"])
        want = sorted([(op, of, m, g, n) for m, g, n in (("vit", "world", 4), ("dit", "world", 4), ("gpt", "dp", 2),
                       ("gpt", "dp", 2)) for op, of in (("reduce_scatter", "grads"), ("all_gather", "weights"))])
        if got != want:
            ok, why = False, "rank %d: %s" % (r["rank"], got)
print(("PASS" if ok else "FAIL") + " zero1_log_reduce_scatter_all_gather" + ("" if ok else ": " + why))
PYEOF

# sim_bytes NAME SPEC LOG PP DP ZERO: every rank's optimizer_state_bytes in LOG equals the
# simulator's optimizer_state_gib * 2^30 of the table `plan --pp PP --dp DP --zero ZERO` plans,
# with the real sizes: module m's param_mib = its parameter count * 4 B, state_mib = 4 x that
# (weights, gradients, AdamW m and v), the backbone's chunk weights = each chunk's real share.
sim_bytes() {
    local name=$1 spec=$2 log=$3 pp=$4 dp=$5 zero=$6
    if ! "$BIGMAC" plan "$spec" --pp "$pp" --dp "$dp" --zero "$zero" -o "$T/$name.table.json" >/dev/null 2>"$T/$name.err"; then
        echo "FAIL $name: plan failed"; sed 's/^/    /' "$T/$name.err"; return; fi
    PYTHONPATH=python $PY - "$spec" "$T/$name.table.json" "$log" "$name" <<'PYEOF'
import json, sys
import bigmac
spec, tpath, log, name = sys.argv[1:5]
t = json.load(open(tpath))
sizes = {}
for m in t["modules"]:
    if m["role"] == "backbone":
        layers, at, cw = t["chunk_layers"], 0, []
        for n in layers:
            cw.append(len(bigmac.module_init(spec, m["name"], at, at + n)))
            at += n
        total = sum(cw)
        t["chunk_weights"] = [c / total for c in cw]
    else:
        total = len(bigmac.module_init(spec, m["name"]))
    m["cost"]["param_mib"] = total * 4 / 2**20
    m["cost"]["state_mib"] = total * 16 / 2**20
json.dump(t, open(tpath, "w"))
sim = bigmac.simulate(bigmac.load_table(tpath))
D = t["dp"]
want = [round(sim["ranks"][g // D]["optimizer_state_gib"] * 2**30, 3) for g in range(t["pp"] * D)]
ok, why = True, ""
for l in open(log):
    got = [r["optimizer_state_bytes"] for r in json.loads(l)["ranks"]]
    if got != want:
        ok, why = False, "measured %s, simulated %s" % (got, want)
print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
PYEOF
}
sim_bytes zero1_optimizer_bytes_equal_simulator_pp2_dp2 $SPEC "$T/z1_22.log" 2 2 1
sim_bytes zero1_optimizer_bytes_equal_simulator_pp2_dp1 $SPEC "$T/z1_21.log" 2 1 1
sim_bytes zero1_optimizer_bytes_equal_simulator_pp1_dp2 $SPEC "$T/z1_11.log" 1 2 1
sim_bytes zero0_optimizer_bytes_equal_simulator_pp1_dp2 $SPEC "$T/z0_11.log" 1 2 0

# a frozen ViT: no moments at all (only the backbone's and the DiT's), under ZeRO 0 and 1
sed 's/"name": "vit", "role": "encoder",/"name": "vit", "role": "encoder", "trainable": false,/' $SPEC >"$T/frozen.json"
for z in 0 1; do
    if timeout 120 mpirun -np 2 "$BIGMAC" train "$T/frozen.json" --pp 1 --dp 2 --zero $z --steps 2 --quiet \
            --log "$T/fz$z.log" >"$T/fz$z.out" 2>&1; then
        sim_bytes frozen_zero${z}_optimizer_bytes_equal_simulator "$T/frozen.json" "$T/fz$z.log" 1 2 $z
    else echo "FAIL frozen_zero${z}_optimizer_bytes_equal_simulator: the run failed"; sed 's/^/    /' "$T/fz$z.out" | head; fi
done
# by hand: (gpt + dit) parameters x 8 bytes (m and v), halved over dp 2 under ZeRO-1
want0=$(( (231648 + 31760) * 8 )); want1=$(( want0 / 2 ))
got0=$($PY -c 'import json,sys; print(" ".join(sorted({"%d" % r["optimizer_state_bytes"] for l in open(sys.argv[1]) for r in json.loads(l)["ranks"]})))' "$T/fz0.log")
got1=$($PY -c 'import json,sys; print(" ".join(sorted({"%d" % r["optimizer_state_bytes"] for l in open(sys.argv[1]) for r in json.loads(l)["ranks"]})))' "$T/fz1.log")
[ "$got0" = "$want0" ] && [ "$got1" = "$want1" ] && echo "PASS frozen_module_allocates_no_moments" ||
    echo "FAIL frozen_module_allocates_no_moments: zero 0 '$got0' (want $want0), zero 1 '$got1' (want $want1)"

# checkpoints under ZeRO-1: a run of 4 steps checkpointed after 2, resumed to 4, equals the
# uninterrupted run; at pp 2 x dp 2 (a file per global rank), pp 2 x dp 1 and --local pp 2
# ck NAME NP ARGS...: uninterrupted 4 steps; 2 steps with --checkpoint; resume to 4; compare
ck() {
    local name=$1 np=$2; shift 2
    local pre=(); [ "$np" != 0 ] && pre=(timeout 120 mpirun -np "$np")
    [ "$np" = 0 ] && pre=(timeout 120)
    "${pre[@]}" "$BIGMAC" train $SPEC --steps 4 --quiet --log "$T/$name.full.log" --dump-params "$T/$name.full.bin" "$@" \
        >"$T/$name.full.out" 2>&1 &&
    "${pre[@]}" "$BIGMAC" train $SPEC --steps 2 --quiet --log "$T/$name.log" --checkpoint "$T/$name.ck" "$@" \
        >"$T/$name.a.out" 2>&1 &&
    "${pre[@]}" "$BIGMAC" train $SPEC --steps 4 --quiet --log "$T/$name.log" --resume "$T/$name.ck" \
        --dump-params "$T/$name.bin" "$@" >"$T/$name.b.out" 2>&1 || {
        echo "FAIL zero1_checkpoint_resume_$name: a run failed"; cat "$T/$name".*out | sed 's/^/    /' | head; return; }
    if [ "$(losses_of "$T/$name.log")" = "$(losses_of "$T/$name.full.log")" ] && cmp -s "$T/$name.bin" "$T/$name.full.bin"
    then echo "PASS zero1_checkpoint_resume_$name"
    else echo "FAIL zero1_checkpoint_resume_$name: $(losses_of "$T/$name.log") vs $(losses_of "$T/$name.full.log")"; fi
}
ck pp2_dp2 4 --pp 2 --dp 2 --zero 1
files=$(cd "$T/pp2_dp2.ck/step-00000002" 2>/dev/null && ls | tr '\n' ' ')
[ "$files" = "COMPLETE rank-0.dp-0.ckpt rank-0.dp-1.ckpt rank-1.dp-0.ckpt rank-1.dp-1.ckpt " ] &&
    echo "PASS zero1_checkpoint_file_per_rank" || echo "FAIL zero1_checkpoint_file_per_rank: $files"
grep -q '^zero 1$' "$T/pp2_dp2.ck/step-00000002/COMPLETE" && grep -q '^dp 2$' "$T/pp2_dp2.ck/step-00000002/COMPLETE" &&
    echo "PASS zero1_checkpoint_marker_says_zero_dp" || echo "FAIL zero1_checkpoint_marker_says_zero_dp"
ck pp2_dp1 2 --pp 2 --zero 1
ck local_pp2 0 --local --pp 2 --zero 1
ck pp1_dp2 2 --pp 1 --dp 2 --zero 1

# a ZeRO-1 set under ZeRO 0 or another dp: refused, naming both
expect_exit zero1_set_resume_zero0_refused 1 timeout 120 mpirun -np 4 "$BIGMAC" train $SPEC --pp 2 --dp 2 --zero 0 \
    --steps 4 --quiet --resume "$T/pp2_dp2.ck"
expect_contains zero1_set_resume_zero0_says "a ZeRO-1 checkpoint of pp 2 x dp 2"
expect_contains zero1_set_resume_zero0_hint "resume with --zero 1 --dp 2"
expect_exit zero1_set_resume_other_dp_refused 1 timeout 120 mpirun -np 2 "$BIGMAC" train $SPEC --pp 2 --dp 1 --zero 1 \
    --steps 4 --quiet --resume "$T/pp2_dp2.ck"
expect_contains zero1_set_resume_other_dp_says "this run has ZeRO-1, pp 2 x dp 1"

# a ZeRO-0 set resumes under ZeRO-1 (each rank takes its shard of the whole moments): equal to
# the uninterrupted ZeRO-1 run
timeout 120 mpirun -np 4 "$BIGMAC" train $SPEC --pp 2 --dp 2 --zero 0 --steps 2 --quiet --checkpoint "$T/z0.ck" \
    >"$T/z0ck.out" 2>&1 &&
timeout 120 mpirun -np 4 "$BIGMAC" train $SPEC --pp 2 --dp 2 --zero 1 --steps 4 --quiet --resume "$T/z0.ck" \
    --dump-params "$T/z0to1.bin" >"$T/z0to1.out" 2>&1 ||
    { echo "FAIL zero0_set_resumes_under_zero1: a run failed"; cat "$T/z0ck.out" "$T/z0to1.out" | head | sed 's/^/    /'; }
params_match zero0_set_resumes_under_zero1 "$T/z0to1.bin" "$T/pp2_dp2.full.bin"

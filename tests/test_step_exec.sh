# test_step_exec.sh — the C executor's record of the step after the walk (src/exec/run.c): every
# rank's log entry has when its gradient collectives started and ended, its optimizer's time and
# the optimizer state it updates (AdamW's two moments: 8 bytes per parameter). Independent
# reference: the final parameters' dump (4 bytes per parameter of the whole model) for pp 1 x
# dp 2, where every rank holds every module. (At pp > 1 the executor builds a replica of every
# encoder and generator on every rank, whether the table runs it there or not, and steps its
# AdamW state: more than the simulator's memory model counts for unified; docs/simulator.md.)
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
SPEC=examples/tiny-mllm.json
PY=/usr/bin/python3
T=$TEST_TMP/step_exec
mkdir -p "$T"

# check LOG DUMP MODE: MODE each = every rank's bytes are 2x the dump; sum = their sum is
check() {
    $PY - "$1" "$2" "$3" <<'EOF'
import json, os, sys
log, dump, mode = sys.argv[1], sys.argv[2], sys.argv[3]
lines = [json.loads(l) for l in open(log)]
want = 2 * os.path.getsize(dump)
ok, why = True, []
for j in lines:
    rs = j["ranks"]
    for r in rs:
        if not (r["sync_end_ms"] >= r["sync_start_ms"] >= 0 and r["optimizer_ms"] > 0):
            ok = False; why.append("step %d rank %d: %s" % (j["step"], r["rank"], r))
    b = [r["optimizer_state_bytes"] for r in rs]
    if (mode == "each" and any(x != want for x in b)) or (mode == "sum" and sum(b) != want):
        ok = False; why.append("step %d: optimizer bytes %s, dump x 2 = %d" % (j["step"], b, want))
print(("PASS" if ok else "FAIL") + " step_exec_tail_" + mode + ("" if ok else ": " + "; ".join(why[:3])))
EOF
}

if timeout 120 mpirun -np 2 "$BIGMAC" train $SPEC --pp 1 --dp 2 --steps 2 --quiet --log "$T/dp.log" \
        --dump-params "$T/dp.bin" >"$T/dp.out" 2>&1; then
    check "$T/dp.log" "$T/dp.bin" each
else echo "FAIL step_exec_tail_each: the run failed"; sed 's/^/    /' "$T/dp.out" | head; fi

# calibrate --step-log: device.optimizer_ms_per_gib is the median over the steps after the first
# and the ranks of optimizer_ms / (optimizer_state_bytes / 2^30), recomputed here from the log
if timeout 120 mpirun -np 2 "$BIGMAC" train $SPEC --steps 4 --quiet --log "$T/p2.log" --trace "$T/p2.json" \
        >"$T/p2.out" 2>&1 &&
   "$BIGMAC" calibrate "$T/p2.json" --spec $SPEC --step-log "$T/p2.log" -o "$T/cal.json" 2>"$T/cal.err"; then
    $PY - "$T/p2.log" "$T/cal.json" <<'EOF2'
import json, statistics, sys
v = [r["optimizer_ms"] / (r["optimizer_state_bytes"] / 2**30)
     for l in open(sys.argv[1]) for j in [json.loads(l)] if j["step"] > 1 for r in j["ranks"]]
got = json.load(open(sys.argv[2]))["device"]["optimizer_ms_per_gib"]
want = statistics.median(v)
ok = abs(got - want) <= 1e-5 * want + 1e-3 and len(v) == 6
print(("PASS" if ok else "FAIL") + " calibrate_step_log_optimizer" + ("" if ok else ": %g vs %g over %d" % (got, want, len(v))))
EOF2
else echo "FAIL calibrate_step_log_optimizer: the run or calibrate failed"; cat "$T/p2.out" "$T/cal.err" | head | sed 's/^/    /'; fi
expect_exit calibrate_step_log_not_a_log 1 "$BIGMAC" calibrate "$T/p2.json" --step-log "$T/p2.json"
expect_contains calibrate_step_log_not_a_log_says "p2.json:1: not a step of \`bigmac train --log\`"
expect_exit calibrate_step_log_missing 1 "$BIGMAC" calibrate "$T/p2.json" --step-log "$T/none.log"
expect_contains calibrate_step_log_missing_says "cannot read the step log"

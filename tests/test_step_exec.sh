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

# the collectives' ring from a real 2-rank run (pp 1 x dp 2: every module all-reduced over both
# ranks, four sizes): calibrate --step-log writes device.coll_latency_us (and coll_gbytes_per_s
# when the sizes tell bandwidth from latency), equal to the fit recomputed here from the log:
# each collective's time is that of the member that started last, from the end of its walk or
# its previous collective, whichever is later (its own work to issue it), to its end, its
# median over the steps after the first; a collective whose last member started it inside its
# walk ("in_walk": overlapped, its end only seen after an op) is left out when any is not;
# least squares through the origin of t = (n-1)/n*2*B*a + 2(n-1)*b (the spec keeps 6
# significant digits: compared within 1e-5)
if timeout 120 mpirun -np 2 "$BIGMAC" train $SPEC --pp 1 --dp 2 --steps 5 --quiet --log "$T/c2.log" --trace "$T/c2.json" \
        >"$T/c2.out" 2>&1 &&
   "$BIGMAC" calibrate "$T/c2.json" --spec $SPEC --step-log "$T/c2.log" -o "$T/c2cal.json" 2>"$T/c2cal.err"; then
    $PY - "$T/c2.log" "$T/c2cal.json" <<'EOF3'
import json, statistics, sys
pts = {}
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j["step"] == 1: continue
    last = {}
    for r in j["ranks"]:
        prev = r["walk_ms"]
        for c in r["collectives"]:
            k = (c["group"], c["module"], c.get("chunk"), c["of"])
            issue = min(prev, c["start_ms"])
            prev = max(prev, c["end_ms"])
            if k not in last or c["start_ms"] > last[k][0]:
                last[k] = (c["start_ms"], c["end_ms"] - issue, c["bytes"], c["ranks"], c.get("in_walk", False))
    for k, (s, d, b, n, w) in last.items():
        pts.setdefault(k, []).append((d, 2 * (n - 1) / n * b, 2 * (n - 1), w))
exact = any(not w for v in pts.values() for _, _, _, w in v)
rows = []
for v in pts.values():
    ds = [d for d, _, _, w in v if not (exact and w)]
    if ds:
        rows.append((statistics.median(ds), v[0][1], v[0][2]))
nin = sum(w for v in pts.values() for _, _, _, w in v)
s11 = sum(x1 * x1 for _, x1, _ in rows); s12 = sum(x1 * x2 for _, x1, x2 in rows); s22 = sum(x2 * x2 for _, _, x2 in rows)
s1t = sum(x1 * t for t, x1, _ in rows); s2t = sum(x2 * t for t, _, x2 in rows)
det = s11 * s22 - s12 * s12
a = b = 0
if len(rows) >= 2 and det > 1e-12 * s11 * s22:  # two unknowns need two sizes
    a = (s1t * s22 - s2t * s12) / det; b = (s2t * s11 - s1t * s12) / det
if not (a > 0) or b < 0:
    a, b = 0, max(0, s2t / s22)
dev = json.load(open(sys.argv[2]))["device"]
got_lat, got_bw = dev.get("coll_latency_us"), dev.get("coll_gbytes_per_s")
want_bw = 1 / a / 1e6 if a > 0 else None
ok = len(pts) == 4 and len(rows) >= 1 and got_lat is not None and abs(got_lat - b * 1e3) <= 1e-5 * max(1, b * 1e3) and \
     ((want_bw is None and got_bw is None) or (got_bw is not None and abs(got_bw - want_bw) <= 1e-5 * want_bw))
print(("PASS" if ok else "FAIL") + " calibrate_step_log_collectives" +
      ("" if ok else ": got bw %r lat %r, recomputed bw %r lat %r over %d" % (got_bw, got_lat, want_bw, b * 1e3, len(rows))) +
      " (%d of %d collectives fitted; %d records overlapped the walk)" % (len(rows), len(pts), nin))
EOF3
else echo "FAIL calibrate_step_log_collectives: the run or calibrate failed"; cat "$T/c2.out" "$T/c2cal.err" | head | sed 's/^/    /'; fi

# calibrate --step-log also writes each module's real size: state_mib = 4 x its weights (weights,
# gradients, AdamW's two moments), the weights from the log's "params", against bigmac.module_init
if [ -f "$T/c2cal.json" ]; then
    PYTHONPATH=python $PY - $SPEC "$T/c2cal.json" <<'EOF4'
import json, sys
import bigmac
spec, cal = sys.argv[1], json.load(open(sys.argv[2]))
got = {m["name"]: m["cost"]["state_mib"] for m in cal["modules"]}
want = {m: 16 * len(bigmac.module_init(spec, m)) / 2**20 for m in ("vit", "gpt", "dit")}
ok = all(abs(got[m] - want[m]) <= 1e-5 * want[m] for m in want) and \
     all("param_mib" not in m["cost"] for m in cal["modules"])  # = state_mib / 4: the default, not written
print(("PASS" if ok else "FAIL") + " calibrate_step_log_state_sizes" + ("" if ok else ": %s vs %s" % (got, want)))
EOF4
else echo "FAIL calibrate_step_log_state_sizes: no calibrated spec"; fi

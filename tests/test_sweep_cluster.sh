# test_sweep_cluster.sh — `sweep SPEC --gpus N --global-batch B` (src/study/cluster.c): the
# layouts it tries (pp x dp = N, pp dividing the backbone's layers, M = B / (dp * spm)), that
# each row's figures are those `simulate` gives the same configuration (an independent path:
# plan flags, --dp, --zero), samples/s = dp * M * spm / step, the ranking and the memory cap,
# the Pareto marks (checked in Python), the --zero flag on the other commands, and usage errors.
. "$(dirname "$0")/lib.sh"
SPEC=examples/tiny-mllm.json   # backbone of 8 layers, 1 sample per microbatch, 1 GiB devices
PY=/usr/bin/python3

OUT_TXT=$("$BIGMAC" sweep "$SPEC" --gpus 8 --global-batch 16 --json 2>/dev/null); rc=$?
[ $rc -eq 0 ] && echo "PASS cluster_json_exit" || echo "FAIL cluster_json_exit: $rc"
printf '%s' "$OUT_TXT" >"$TEST_TMP/c.json"
$PY - "$TEST_TMP/c.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
rows = j["rows"]
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
need = {"pp", "dp", "vpp", "microbatches", "policy", "window", "zero", "step_ms", "samples_per_s",
        "peak_mem_gib", "oom"}
check("cluster_row_keys", rows and all(need <= set(r) for r in rows), str(rows[:1]))
# 8 GPUs, 8 layers, 16 samples: pp in 1, 2, 4, 8 with dp = 8 / pp and M = 16 / dp
check("cluster_layouts", sorted({(r["pp"], r["dp"], r["microbatches"]) for r in rows}) ==
      [(1, 8, 2), (2, 4, 4), (4, 2, 8), (8, 1, 16)], str(sorted({(r["pp"], r["dp"]) for r in rows})))
check("cluster_both_zero", {r["zero"] for r in rows} == {0, 1})
check("cluster_samples_are_the_step",
      all(abs(r["samples_per_s"] - r["dp"] * r["microbatches"] / (r["step_ms"] / 1000)) <= 1e-6 * r["samples_per_s"]
          for r in rows))
check("cluster_step_parts", all(abs(r["step_ms"] - r["makespan_ms"] - r["sync_exposed_ms"] - r["optimizer_ms"]) < 1e-6
                                 and r["step_ms"] >= r["makespan_ms"] for r in rows))
fit = [r for r in rows if not r["oom"]]
check("cluster_fit_first", rows[:len(fit)] == fit)
check("cluster_ranked", all(a["samples_per_s"] >= b["samples_per_s"] for a, b in zip(fit, fit[1:])))
check("cluster_cap", all(r["peak_mem_gib"] <= j["mem_cap_gib"] for r in fit) and
      all(r["peak_mem_gib"] > j["mem_cap_gib"] for r in rows[len(fit):]))
check("cluster_best", j["best"] == dict(rows[0], rank=1) if fit else j["best"] is None)
dom = lambda b, a: b["peak_mem_gib"] <= a["peak_mem_gib"] and b["samples_per_s"] >= a["samples_per_s"] and \
    (b["peak_mem_gib"] < a["peak_mem_gib"] or b["samples_per_s"] > a["samples_per_s"])
check("cluster_pareto", all(r["pareto"] == (not r["oom"] and not any(dom(b, r) for b in fit if b is not r)) for r in rows))
# rows to recheck with simulate: the best, and the best ZeRO-1 row with dp > 1
z1 = [r for r in fit if r["zero"] == 1 and r["dp"] > 1][0]
with open(sys.argv[1] + ".pick", "w") as f:
    for r in (rows[0], z1):
        f.write("%d %d %d %d %s %d %d %.9g %.9g %.9g\n" % (r["pp"], r["dp"], r["vpp"], r["microbatches"], r["policy"],
                r["window"], r["zero"], r["step_ms"], r["samples_per_s"], r["peak_mem_gib"]))
EOF
# each picked row again through simulate's own flags
while read -r pp dp vpp mb pol win zero step sps peak; do
    bb=1f1b; [ "$vpp" -gt 1 ] && bb=interleaved
    wf=(); [ "$pol" = bigmac ] && wf=(--window "$win")
    got=$("$BIGMAC" simulate "$SPEC" --pp "$pp" --dp "$dp" --vpp "$vpp" --microbatches "$mb" --unit "$pp" --backbone $bb \
          --policy "$pol" "${wf[@]}" --zero "$zero" --json 2>/dev/null |
          $PY -c 'import json,sys; j=json.load(sys.stdin); print("%.9g %.9g %.9g" % (j["step_ms"], j["samples_per_s"], j["peak_mem_gib"]))')
    want=$($PY -c "print('%.9g %.9g %.9g' % ($step, $sps, $peak))")
    [ "$got" = "$want" ] && echo "PASS cluster_row_is_simulate_pp${pp}_dp${dp}_zero$zero" ||
        echo "FAIL cluster_row_is_simulate_pp${pp}_dp${dp}_zero$zero: simulate says '$got', the sweep '$want'"
done <"$TEST_TMP/c.json.pick"

# the human output: the layouts line, a ranked table, a best line with its parts
expect_exit cluster_human_exit 0 "$BIGMAC" sweep "$SPEC" --gpus 8 --global-batch 16 --frontier
expect_contains cluster_human_layouts "layouts: pp 1 x dp 8 (M 2), pp 2 x dp 4 (M 4), pp 4 x dp 2 (M 8), pp 8 x dp 1 (M 16)"
expect_contains cluster_human_best "best: pp "
expect_contains cluster_human_why "+ exposed sync "

# a cap nothing fits: exit 1, best none
expect_exit cluster_cap_none 1 "$BIGMAC" sweep "$SPEC" --gpus 8 --global-batch 16 --mem-cap-gib 0.001
expect_contains cluster_cap_none_says "best: none (every configuration is over the memory cap)"

# no layout: 3 GPUs cannot split 8 layers, and a batch dp does not divide
expect_exit cluster_no_layout 1 "$BIGMAC" sweep "$SPEC" --gpus 3 --global-batch 16
expect_contains cluster_no_layout_says "no pp x dp = 3"
expect_exit cluster_usage_pair 2 "$BIGMAC" sweep "$SPEC" --gpus 8
expect_contains cluster_usage_pair_says "--gpus and --global-batch go together"
expect_exit cluster_usage_pp 2 "$BIGMAC" sweep "$SPEC" --gpus 8 --global-batch 16 --pp 2
expect_exit cluster_usage_zero 2 "$BIGMAC" sweep "$SPEC" --gpus 8 --global-batch 16 --zero 1

# --zero on the shared plan flags: plan writes "zero": 1 only when asked; a bad value is a usage error
"$BIGMAC" plan "$SPEC" --dp 2 -o "$TEST_TMP/z0.json" >/dev/null && "$BIGMAC" plan "$SPEC" --dp 2 --zero 1 -o "$TEST_TMP/z1.json" >/dev/null
if ! grep -q '"zero"' "$TEST_TMP/z0.json" && grep -q '"zero": 1' "$TEST_TMP/z1.json"; then echo "PASS zero_flag_plan"
else echo "FAIL zero_flag_plan"; fi
expect_exit zero_flag_bad 2 "$BIGMAC" simulate "$SPEC" --zero 2
expect_contains zero_flag_bad_says "--zero: expected 0"
# the table keeps ZeRO-1: simulating it gives the state that planning with --zero 1 gives
a=$("$BIGMAC" simulate "$SPEC" --table "$TEST_TMP/z1.json" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["peak_mem_gib"])')
b=$("$BIGMAC" simulate "$SPEC" --dp 2 --zero 1 --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["peak_mem_gib"])')
c=$("$BIGMAC" simulate "$SPEC" --dp 2 --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["peak_mem_gib"])')
[ "$a" = "$b" ] && $PY -c "import sys; sys.exit(0 if $b < $c else 1)" && echo "PASS zero_table_round_trip" ||
    echo "FAIL zero_table_round_trip: table $a, planned $b, zero 0 $c"

# the Chrome trace of a simulated step: a "step" thread per rank with its collectives' span (and
# the time they took in it), its optimizer and, under ZeRO-1, its weight gathers; it loads back
"$BIGMAC" render "$SPEC" --format trace --dp 2 --zero 1 -o "$TEST_TMP/step.trace.json" >/dev/null 2>&1
$PY - "$TEST_TMP/step.trace.json" <<'EOF2'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
st = [e for e in ev if e.get("cat") == "step"]
names = {e["name"] for e in st}
ok = names == {"gradient reduce-scatters", "weight all-gathers"} and {e["pid"] for e in st} == {0, 1, 2, 3} and \
    all(e["args"]["collectives_ms"] <= e["dur"] / 1000 + 1e-9 for e in st)
print(("PASS" if ok else "FAIL") + " trace_step_events" + ("" if ok else ": %s" % sorted(names)))
EOF2
expect_exit trace_step_loads_back 0 "$BIGMAC" render "$TEST_TMP/step.trace.json" --format ascii
"$BIGMAC" render tests/specs/hosts-p8.json --format trace -o "$TEST_TMP/walk.trace.json" >/dev/null 2>&1
if grep -q '"cat":"step"' "$TEST_TMP/walk.trace.json"; then echo "FAIL trace_no_step_when_the_step_is_the_walk"
else echo "PASS trace_no_step_when_the_step_is_the_walk"; fi

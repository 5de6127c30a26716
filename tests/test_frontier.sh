# test_frontier.sh — the memory-equal baseline of `simulate --compare` (optimus+recompute
# whenever optimus runs out of memory) and `sweep --frontier`: output shape, JSON keys, and
# that the marked points are the non-dominated ones (checked with awk, independent of bigmac).
. "$(dirname "$0")/lib.sh"
OOM_SPEC=tests/specs/recompute-oom.json   # qwen3 understanding at 56 GiB: optimus needs 59.8
FIT_SPEC=examples/tiny-mllm.json          # optimus fits

# ---- simulate --compare: optimus+recompute appears exactly when optimus is OOM, and fits
expect_exit cmp_oom_exit 0 "$BIGMAC" simulate "$OOM_SPEC" --compare
if printf '%s\n' "$OUT_TXT" | grep -Eq '^optimus +[0-9.]+ .* OOM( |$)' &&
   printf '%s\n' "$OUT_TXT" | grep -Eq '^optimus\+recompute +[0-9.]+ .* no( |$)'; then
    echo "PASS cmp_oom_human_adds_fitting_recompute"
else echo "FAIL cmp_oom_human_adds_fitting_recompute"; printf '%s\n' "$OUT_TXT" | sed 's/^/    /'; fi
OUT_TXT=$("$BIGMAC" simulate "$OOM_SPEC" --compare --json 2>/dev/null)
# from the optimus+recompute object's "policy" line to its "ranks": its top-level oom
got=$(printf '%s\n' "$OUT_TXT" | awk '/"policy": "optimus\+recompute"/{on=1} on&&/"oom":/{print $2; exit}')
[ "$got" = "false," ] && echo "PASS cmp_oom_json_recompute_fits" || echo "FAIL cmp_oom_json_recompute_fits: oom $got"
got=$(printf '%s\n' "$OUT_TXT" | awk '/"policy": "optimus",/{on=1} on&&/"oom":/{print $2; exit}')
[ "$got" = "true," ] && echo "PASS cmp_oom_json_optimus_oom" || echo "FAIL cmp_oom_json_optimus_oom: oom $got"
expect_exit cmp_fit_exit 0 "$BIGMAC" simulate "$FIT_SPEC" --compare
if printf '%s\n' "$OUT_TXT" | grep -q 'optimus+recompute'; then
    echo "FAIL cmp_fit_no_recompute_row"; else echo "PASS cmp_fit_no_recompute_row"; fi
OUT_TXT=$("$BIGMAC" simulate "$FIT_SPEC" --compare --json 2>/dev/null)
if printf '%s\n' "$OUT_TXT" | grep -q 'optimus+recompute'; then
    echo "FAIL cmp_fit_json_no_recompute_row"; else echo "PASS cmp_fit_json_no_recompute_row"; fi

# ---- sweep --frontier --json: one object {"points": [...], "memory_gib"}, each point with
# exactly the contract's keys; pareto true exactly for the non-dominated points (awk, O(n^2))
OUT_TXT=$("$BIGMAC" sweep "$OOM_SPEC" --frontier --json 2>/dev/null); rc=$?
[ $rc -eq 0 ] && echo "PASS frontier_json_exit" || echo "FAIL frontier_json_exit: $rc"
keys=$(printf '%s\n' "$OUT_TXT" | awk -F'"' '/^      "/{print $2}' | sort | uniq -c | awk '{print $1}' | sort -u)
n=$(printf '%s\n' "$OUT_TXT" | grep -c '"policy"')
nk=$(printf '%s\n' "$OUT_TXT" | awk -F'"' '/^      "/{print $2}' | sort -u | tr '\n' ' ')
if [ "$nk" = "makespan_ms oom pareto peak_mem_gib policy recompute samples_per_s window " ] && [ "$keys" = "$n" ] &&
   printf '%s\n' "$OUT_TXT" | grep -q '^  "memory_gib": 56'; then
    echo "PASS frontier_json_keys"
else echo "FAIL frontier_json_keys: keys '$nk' counts '$keys' points $n"; fi
bad=$(printf '%s\n' "$OUT_TXT" | awk '
    BEGIN {n = 0}
    /"peak_mem_gib"/ {gsub(/,/, "", $2); m[n] = $2 + 0}
    /"makespan_ms"/  {gsub(/,/, "", $2); t[n] = $2 + 0}
    /"pareto"/       {p[n] = ($2 == "true") ? 1 : 0; n++}
    END {
        bad = 0
        for (i = 0; i < n; i++) {
            dom = 0
            for (j = 0; j < n; j++)
                if (j != i && m[j] <= m[i] && t[j] <= t[i] && (m[j] < m[i] || t[j] < t[i])) dom = 1
            if (p[i] == dom) bad++
        }
        print (n > 5 ? bad : "too few points: " n)
    }')
[ "$bad" = "0" ] && echo "PASS frontier_pareto_exactly_non_dominated" || echo "FAIL frontier_pareto_exactly_non_dominated: $bad"
if printf '%s\n' "$OUT_TXT" | grep -q '"recompute": "all"' && printf '%s\n' "$OUT_TXT" | grep -q '"recompute": "nested"' &&
   ! printf '%s\n' "$OUT_TXT" | grep -q '"policy": "none"'; then
    echo "PASS frontier_json_choices"; else echo "FAIL frontier_json_choices"; fi

# ---- human: the memory rule line, a mark, a cap from --mem-cap-gib; flags that make no sense
expect_exit frontier_human 0 "$BIGMAC" sweep "$OOM_SPEC" --frontier --mem-cap-gib 40
expect_contains frontier_human_rule "device memory 40.000 GiB"
if printf '%s\n' "$OUT_TXT" | grep -q '^\* '; then echo "PASS frontier_human_marks"; else echo "FAIL frontier_human_marks"; fi
expect_exit frontier_policy_refused 2 "$BIGMAC" sweep "$OOM_SPEC" --frontier --policy bigmac
expect_contains frontier_policy_refused_msg "covers every policy"
expect_exit frontier_pp_list_refused 2 "$BIGMAC" sweep "$OOM_SPEC" --frontier --pp 2,4
expect_exit frontier_pp_one 0 "$BIGMAC" sweep "$FIT_SPEC" --frontier --pp 2
expect_contains frontier_pp_one_msg "frontier at pp 2"

# ---- a measured run against its table simulated from the run's own costs; calibrate writes
# the per-microbatch encoder multipliers as data.encoder_cost_scale {"values": [...]}
T=$TEST_TMP
SMALL=tests/specs/exec-small.json
"$BIGMAC" plan $SMALL -o "$T/vs_table.json" >/dev/null 2>&1
OPENBLAS_NUM_THREADS=1 timeout 120 "$BIGMAC" train $SMALL --local --steps 2 --table "$T/vs_table.json" \
    --trace "$T/vs_trace.json" >/dev/null 2>&1
expect_exit vs_render 0 "$BIGMAC" render "$T/vs_trace.json" --table "$T/vs_table.json" --format html -o "$T/vs.html"
if grep -q '<table id="vs">' "$T/vs.html" && grep -q '<table id="vsops">' "$T/vs.html" &&
   [ "$(grep -c '^<tr><td>\(vit\|gpt\|dit\)</td><td>[FB]</td>' "$T/vs.html")" = 6 ] &&
   grep -q '"label":"simulated (calibrated)"' "$T/vs.html" && grep -q '"pd":\[' "$T/vs.html"; then
    echo "PASS vs_html_sections"; else echo "FAIL vs_html_sections"; fi
expect_exit vs_needs_html 2 "$BIGMAC" render "$T/vs_trace.json" --table "$T/vs_table.json" --format svg
expect_exit vs_needs_measured 1 "$BIGMAC" render $SMALL --table "$T/vs_table.json" --format html
expect_contains vs_needs_measured_msg "needs a measured trace"
"$BIGMAC" plan $SMALL --policy optimus -o "$T/vs_other.json" >/dev/null 2>&1
expect_exit vs_other_plan 1 "$BIGMAC" render "$T/vs_trace.json" --table "$T/vs_other.json" --format html -o "$T/x.html"
expect_contains vs_other_plan_msg "not the plan the trace ran"
expect_exit calibrate_values 0 "$BIGMAC" calibrate "$T/vs_trace.json" --spec $SMALL -o "$T/cal.json"
n=$(awk '/"values": \[/{on=1; next} on&&/\]/{on=0} on{c++} END{print c+0}' "$T/cal.json")
[ "$n" = 4 ] && echo "PASS calibrate_values_one_per_microbatch" || echo "FAIL calibrate_values_one_per_microbatch: $n"
expect_exit calibrate_values_simulate 0 "$BIGMAC" simulate "$T/cal.json"

#!/usr/bin/env bash
# test_render.sh — `bigmac render` and the plan flags --ascii/--csv/--from-csv from the command
# line: every format from a spec, a table, a trace and a CSV; usage errors exit 2, bad input
# exits 1 with a positioned message; CSV round trips give byte-identical tables.
. "$(dirname "$0")/lib.sh"
S=examples/tiny-mllm.json
T=$TEST_TMP

expect_exit render_help 0 "$BIGMAC" render --help
expect_contains render_help_usage "usage: bigmac render"
expect_exit render_no_args 2 "$BIGMAC" render
expect_exit render_no_format 2 "$BIGMAC" render "$S"
expect_contains render_no_format_says "--format is required"
expect_exit render_bad_format 2 "$BIGMAC" render "$S" --format png
expect_contains render_bad_format_says "unknown format 'png'"
expect_exit render_unknown_flag 2 "$BIGMAC" render "$S" --format svg --frobnicate
expect_exit render_two_inputs 2 "$BIGMAC" render "$S" "$S" --format svg
expect_exit render_missing_file 1 "$BIGMAC" render "$T/nope.json" --format svg
expect_contains render_missing_file_error "bigmac: error:"
printf '{"format": "bigmac-spec", "version": 1,' >"$T/broken.json"
expect_exit render_broken_json 1 "$BIGMAC" render "$T/broken.json" --format svg
expect_contains render_broken_json_pos "broken.json:1:"
# a deeply nested input stops at the project's guarded parser (src/spec/jpos.c, 64 levels) with
# the position of the first too-deep bracket, before jansson's recursion sees it; the same file
# one level inside the limit parses and is refused for what it is (not a bigmac file)
deep() { printf '{"format": "x", "d": '; printf "%${1}s" | tr ' ' '['; printf "%${1}s" | tr ' ' ']'; printf '}'; }
deep 3000 >"$T/deep.json"
expect_exit render_deep_json 1 "$BIGMAC" render "$T/deep.json" --format svg
expect_contains render_deep_json_says "deep.json:1:85: JSON nested deeper than 64 levels"
deep 63 >"$T/deep63.json"
expect_exit render_deep63_json 1 "$BIGMAC" render "$T/deep63.json" --format svg
expect_contains render_deep63_json_parses 'not a bigmac spec, table or trace ("format" is "x"'
printf '{"format": "something"}' >"$T/other.json"
expect_exit render_not_bigmac 1 "$BIGMAC" render "$T/other.json" --format svg
expect_contains render_not_bigmac_says "not a bigmac spec, table or trace"
printf '{"traceEvents": []}' >"$T/foreign.json"
expect_exit render_foreign_trace 1 "$BIGMAC" render "$T/foreign.json" --format html
expect_contains render_foreign_trace_says "without a \"bigmac\" object"
expect_exit render_bad_window 1 "$BIGMAC" render "$S" --format svg --window 1
expect_contains render_bad_window_says "cannot plan"

# every format from the spec
for f in ascii svg html trace csv; do
    expect_exit "render_spec_$f" 0 "$BIGMAC" render "$S" --format $f -o "$T/s.$f"
    if [ -s "$T/s.$f" ]; then echo "PASS render_spec_${f}_nonempty"; else echo "FAIL render_spec_${f}_nonempty"; fi
done
expect_exit render_ascii_stdout 0 env COLUMNS=100 "$BIGMAC" render "$S" --format ascii
n=$(printf '%s\n' "$OUT_TXT" | grep -c '^rank [0-9] |')
if [ "$n" = 4 ]; then echo "PASS render_ascii_one_line_per_rank"; else echo "FAIL render_ascii_one_line_per_rank ($n)"; fi
w=$(printf '%s\n' "$OUT_TXT" | grep '^rank 0 |' | awk '{print length($0)}')
if [ "$w" = 97 ]; then echo "PASS render_ascii_columns_env"; else echo "FAIL render_ascii_columns_env (line length $w)"; fi
expect_exit render_ascii_width 0 "$BIGMAC" render "$S" --format ascii --width 60
w=$(printf '%s\n' "$OUT_TXT" | grep '^rank 0 |' | awk '{print length($0)}')
if [ "$w" = 69 ]; then echo "PASS render_ascii_width_flag"; else echo "FAIL render_ascii_width_flag (line length $w)"; fi
expect_contains render_ascii_legend "legend:"
expect_contains render_ascii_makespan "makespan "
if grep -q "Policy comparison" "$T/s.html" && grep -q "zero-added-bubble bound" "$T/s.html"; then
    echo "PASS render_html_from_spec_compares"; else echo "FAIL render_html_from_spec_compares"; fi

# from a table, and plan flags change the plan
"$BIGMAC" plan "$S" --policy optimus --backbone 1f1b --vpp 1 -o "$T/t.json" >/dev/null
expect_exit render_table_svg 0 "$BIGMAC" render "$T/t.json" --format svg -o "$T/t.svg"
if grep -q "optimus, 1f1b" "$T/t.svg"; then echo "PASS render_table_svg_title"; else echo "FAIL render_table_svg_title"; fi
if grep -q "Policy comparison" <("$BIGMAC" render "$T/t.json" --format html 2>/dev/null); then
    echo "FAIL render_table_html_no_compare"; else echo "PASS render_table_html_no_compare"; fi
expect_exit render_spec_flags 0 "$BIGMAC" render "$S" --format ascii --policy unified --backbone 1f1b --vpp 1
expect_contains render_spec_flags_apply "policy unified, backbone 1f1b"

# a trace re-renders in every format, including as a trace again
expect_exit render_trace_write 0 "$BIGMAC" render "$T/t.json" --format trace -o "$T/t.trace.json"
for f in ascii svg html trace csv; do
    expect_exit "render_from_trace_$f" 0 "$BIGMAC" render "$T/t.trace.json" --format $f -o "$T/r.$f"
done
"$BIGMAC" render "$T/t.json" --format csv -o "$T/direct.csv" 2>/dev/null
if cmp -s "$T/r.csv" "$T/direct.csv"; then echo "PASS render_trace_keeps_table"; else echo "FAIL render_trace_keeps_table"; fi
"$BIGMAC" render "$T/t.json" --format ascii -o "$T/direct.ascii" --width 90 2>/dev/null
"$BIGMAC" render "$T/t.trace.json" --format ascii -o "$T/r2.ascii" --width 90 2>/dev/null
if cmp -s "$T/r2.ascii" "$T/direct.ascii"; then echo "PASS render_trace_keeps_times"; else echo "FAIL render_trace_keeps_times"; diff "$T/r2.ascii" "$T/direct.ascii" | head -5; fi

# plan --ascii / --csv / --from-csv
expect_exit plan_ascii 0 "$BIGMAC" plan "$S" --ascii
expect_contains plan_ascii_lanes "rank 3 |"
for pol in bigmac optimus unified unified-balanced ideal none; do
    "$BIGMAC" plan "$S" --policy $pol -o "$T/a.json" --csv "$T/a.csv" >/dev/null 2>&1
    expect_exit "plan_from_csv_$pol" 0 "$BIGMAC" plan --from-csv "$T/a.csv" -o "$T/b.json"
    if cmp -s "$T/a.json" "$T/b.json"; then echo "PASS csv_round_trip_$pol"; else echo "FAIL csv_round_trip_$pol"; fi
    "$BIGMAC" plan --from-csv "$T/a.csv" "$S" -o "$T/c.json" >/dev/null 2>&1
    if cmp -s "$T/a.json" "$T/c.json"; then echo "PASS csv_round_trip_spec_$pol"; else echo "FAIL csv_round_trip_spec_$pol"; fi
    expect_exit "verify_from_csv_$pol" 0 "$BIGMAC" verify "$T/b.json"
done
# render takes a CSV directly
expect_exit render_csv_input 0 "$BIGMAC" render "$T/a.csv" --format ascii
# a hand edit that breaks a cell
sed 's/vit:F3/vti:F3/' "$T/a.csv" >"$T/sched.csv"
"$BIGMAC" plan "$S" --csv "$T/a.csv" >/dev/null
sed 's/vit:F3/vti:F3/' "$T/a.csv" >"$T/sched.csv"
expect_exit plan_from_csv_bad_cell 1 "$BIGMAC" plan --from-csv "$T/sched.csv"
expect_contains plan_from_csv_bad_cell_pos "sched.csv:"
expect_contains plan_from_csv_bad_cell_msg ": unknown module \"vti\" in cell \"vti:F3\""
# a hand edit that swaps two backbone ops parses; plan refuses it with the verifier's message
# (only valid tables are written), --no-verify writes it with a warning, and verify catches it
awk -F, 'BEGIN{OFS=","} /^#/ {print; next} NR>0 && !done {t=$2; $2=$3; $3=t; done=1} {print}' "$T/a.csv" >"$T/swap.csv"
expect_exit plan_from_csv_swapped_refused 1 "$BIGMAC" plan --from-csv "$T/swap.csv" -o "$T/swap.json"
expect_contains plan_from_csv_swapped_says "swap.csv: invariant"
expect_exit plan_from_csv_swapped 0 "$BIGMAC" plan --from-csv "$T/swap.csv" -o "$T/swap.json" --no-verify
expect_contains plan_from_csv_swapped_warns "bigmac: warning: $T/swap.csv: --no-verify"
expect_exit verify_swapped_fails 1 "$BIGMAC" verify "$T/swap.json"
expect_exit plan_from_csv_missing 1 "$BIGMAC" plan --from-csv "$T/nope.csv"
expect_exit plan_csv_needs_value 2 "$BIGMAC" plan "$S" --csv

# names the CSV grammar cannot carry are refused, not written broken; other formats escape them
sed 's/"name": "vit"/"name": "my <vit>"/' "$S" >"$T/odd.json"
expect_exit csv_odd_name_refused 1 "$BIGMAC" render "$T/odd.json" --format csv -o "$T/odd.csv"
expect_contains csv_odd_name_says "module name \"my <vit>\" cannot be written as CSV"
expect_exit plan_csv_odd_name_refused 1 "$BIGMAC" plan "$T/odd.json" --csv "$T/odd.csv"
expect_exit svg_odd_name 0 "$BIGMAC" render "$T/odd.json" --format svg -o "$T/odd.svg"
if grep -q "my &lt;vit&gt;" "$T/odd.svg"; then echo "PASS svg_odd_name_escaped"; else echo "FAIL svg_odd_name_escaped"; fi
expect_exit html_odd_name 0 "$BIGMAC" render "$T/odd.json" --format html -o "$T/odd.html"
if grep -q '"my \\u003cvit\\u003e"' "$T/odd.html" && ! grep -q "my <vit>" "$T/odd.html"; then
    echo "PASS html_odd_name_escaped"; else echo "FAIL html_odd_name_escaped"; fi

# a measured trace (the executor's) is drawn as measured
sed 's/"measured": false, "samples_per_microbatch"/"measured": true, "samples_per_microbatch"/' "$T/t.trace.json" >"$T/m.trace.json"
expect_exit render_measured 0 "$BIGMAC" render "$T/m.trace.json" --format ascii
expect_contains render_measured_says "measured timeline"
# a truncated trace is an error with a position, not a crash
head -c 5000 "$T/t.trace.json" >"$T/cut.trace.json"
expect_exit render_truncated_trace 1 "$BIGMAC" render "$T/cut.trace.json" --format html
expect_contains render_truncated_trace_pos "cut.trace.json:"

#!/usr/bin/env bash
# test_trace_from.sh — `train --trace FILE --trace-from K` traces every step from K to the last
# (FILE less .json plus .stepK.json; the last step also to FILE as before), so that calibrate
# sees every step's data draw (docs/simulator.md "Predicting a run"). Reference: a run of
# --steps K traces its last step, step K, on its own; the measured activation bytes of a step
# are set by its data alone (images per microbatch), so both traces give the same act_mib.
cd "$(dirname "$0")/.."
. tests/lib.sh
export OPENBLAS_NUM_THREADS=1
SPEC=examples/tiny-mllm.json
T=$TEST_TMP/trace_from
mkdir -p "$T"
acts() { "$BIGMAC" calibrate "$1" 2>/dev/null | grep -o '"act_mib": [0-9.e+-]*' | tr '\n' ' '; }

expect_exit trace_from_local 0 "$BIGMAC" train $SPEC --local --pp 2 --unit 2 --steps 4 --trace-from 2 \
    --trace "$T/r.json" --quiet
got=$(cd "$T" && ls r*.json | tr '\n' ' ')
if [ "$got" = "r.json r.step2.json r.step3.json r.step4.json " ]; then echo "PASS trace_from_files"
else echo "FAIL trace_from_files: $got"; fi
if cmp -s "$T/r.json" "$T/r.step4.json"; then echo "PASS trace_from_last_step_in_both"
else echo "FAIL trace_from_last_step_in_both"; fi
for k in 2 3 4; do
    expect_exit trace_from_reference_$k 0 "$BIGMAC" train $SPEC --local --pp 2 --unit 2 --steps $k \
        --trace "$T/ref$k.json" --quiet
    a=$(acts "$T/r.step$k.json") b=$(acts "$T/ref$k.json")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "PASS trace_from_step_${k}_is_step_$k"
    else echo "FAIL trace_from_step_${k}_is_step_$k: '$a' vs '$b'"; fi
done
# the steps drew other data (12, 13 and 10 images: other activation bytes)
a2=$(acts "$T/r.step2.json") a3=$(acts "$T/r.step3.json") a4=$(acts "$T/r.step4.json")
if [ "$a2" != "$a3" ] && [ "$a3" != "$a4" ]; then echo "PASS trace_from_steps_differ"
else echo "FAIL trace_from_steps_differ: $a2 / $a3 / $a4"; fi
# hand-computed: the dataset (data.seed 1, 1 sample of 1..2 images per microbatch, 8
# microbatches) draws 12, 13 and 10 images in steps 2, 3 and 4 (bm_data_batch), and the vit's
# activation bytes per microbatch are proportional to its images, so its mean act_mib is too
vit() { printf '%s\n' "$1" | awk '{print $2}'; }
r=$(awk -v a="$(vit "$a2")" -v b="$(vit "$a3")" -v c="$(vit "$a4")" 'BEGIN{
    e1 = a / c / 1.2 - 1; e2 = b / c / 1.3 - 1; if (e1 < 0) e1 = -e1; if (e2 < 0) e2 = -e2
    print (c > 0 && e1 < 0.005 && e2 < 0.005) ? "ok" : "bad " a " " b " " c}')
if [ "$r" = ok ]; then echo "PASS trace_from_vit_bytes_follow_image_counts"
else echo "FAIL trace_from_vit_bytes_follow_image_counts: $r"; fi
# every step file is a trace calibrate reads, together
expect_exit trace_from_calibrate_all 0 "$BIGMAC" calibrate "$T"/r.step*.json --spec $SPEC --mean --run-median -o "$T/cal.json"
# bench/trace_replay.py replays the step traces through their DAG: with nothing replaced it gives
# every measured makespan back (its check row), and it prints every variant it documents
PY=${PYTHON:-/usr/bin/python3}
out=$("$PY" bench/trace_replay.py "$T"/r.step*.json 2>&1)
r=$(printf '%s\n' "$out" | awk -F'|' '$2 == " measured " {a = $3 + 0; b = $4 + 0; c = $5 + 0
    print (a < 0.5 && a > -0.5 && b > -0.5 && c < 0.5) ? "ok" : "off " $0}')
rows=$(printf '%s\n' "$out" | grep -c '^| [a-z]')
if [ "$r" = ok ] && [ "$rows" = 12 ]; then echo "PASS trace_replay_measured_is_the_trace"
else echo "FAIL trace_replay_measured_is_the_trace: '$r', $rows rows: $out"; fi
"$PY" bench/trace_replay.py "$T/cal.json" >"$T/replay.out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "cal.json: not an executor trace" "$T/replay.out"; then echo "PASS trace_replay_refuses_a_non_trace"
else echo "FAIL trace_replay_refuses_a_non_trace: rc $rc, $(cat "$T/replay.out")"; fi
# no .json suffix: .stepK.json appended
expect_exit trace_from_no_suffix 0 "$BIGMAC" train $SPEC --local --pp 2 --unit 2 --steps 2 --trace-from 2 \
    --trace "$T/plain" --quiet
if [ -s "$T/plain.step2.json" ] && [ -s "$T/plain" ]; then echo "PASS trace_from_no_suffix_files"
else echo "FAIL trace_from_no_suffix_files"; fi

# refusals
expect_exit trace_from_needs_trace 2 "$BIGMAC" train $SPEC --local --trace-from 2
expect_contains trace_from_needs_trace_message "--trace-from needs --trace FILE"
expect_exit trace_from_zero 2 "$BIGMAC" train $SPEC --local --trace "$T/x.json" --trace-from 0
expect_contains trace_from_zero_message "--trace-from"
expect_exit trace_from_not_a_number 2 "$BIGMAC" train $SPEC --local --trace "$T/x.json" --trace-from two
expect_exit trace_from_needs_value 2 "$BIGMAC" train $SPEC --local --trace "$T/x.json" --trace-from
expect_exit trace_from_after_last 1 "$BIGMAC" train $SPEC --local --pp 2 --unit 2 --steps 2 --trace "$T/x.json" \
    --trace-from 3 --quiet
expect_contains trace_from_after_last_message "--trace-from 3 is after the last step (2)"
expect_exit trace_from_reference 2 "$BIGMAC" train $SPEC --reference --trace "$T/x.json" --trace-from 1

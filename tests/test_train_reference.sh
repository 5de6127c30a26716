#!/usr/bin/env bash
# Single-process reference training of examples/tiny-mllm.json: the loss must fall well below
# its start (a broken backward cannot reach 0.6x in 40 steps), the log has one JSON object per
# step with exact activation bytes, and pipelined training without --reference is refused.
source "$(dirname "$0")/lib.sh"
spec=examples/tiny-mllm.json
log="$TEST_TMP/train.jsonl"

expect_exit train_reference_runs 0 "$BIGMAC" train "$spec" --reference --steps 40 --log "$log"
expect_contains train_reference_progress "step   40/40"

first=$(head -1 "$log" | sed 's/.*"loss": \([0-9.eE+-]*\).*/\1/')
last=$(tail -1 "$log" | sed 's/.*"loss": \([0-9.eE+-]*\).*/\1/')
if awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 3 && b < 0.6 * a) }'; then
    echo "PASS train_reference_loss_falls ($first -> $last)"
else
    echo "FAIL train_reference_loss_falls: first $first, last $last (want last < 0.6 x first)"
fi

n=$(wc -l <"$log")
if [ "$n" -eq 40 ] && grep -q '"ranks": \[{"rank": 0, "peak_act_bytes": {"encoder": [1-9][0-9]*, "backbone": [1-9][0-9]*, "generator": [1-9][0-9]*}}\]' "$log"; then
    echo "PASS train_reference_log"
else
    echo "FAIL train_reference_log: $n lines"; head -2 "$log" | sed 's/^/    /'
fi

# same spec, same numbers: training is deterministic
"$BIGMAC" train "$spec" --reference --steps 3 --log "$TEST_TMP/a.jsonl" >/dev/null
if [ "$(sed 's/"ms": [0-9.]*//' "$TEST_TMP/a.jsonl")" = "$(head -3 "$log" | sed 's/"ms": [0-9.]*//')" ]; then
    echo "PASS train_reference_deterministic"
else
    echo "FAIL train_reference_deterministic"
fi

expect_exit train_pipelined_not_yet 1 "$BIGMAC" train "$spec"
expect_contains train_pipelined_not_yet_says_why "pipelined training arrives with the executor"
expect_exit train_no_spec_is_usage 2 "$BIGMAC" train --reference
expect_exit train_bad_steps_is_usage 2 "$BIGMAC" train "$spec" --reference --steps 0

# a spec without "impl" cannot be trained, and says how to fix it
expect_exit train_needs_impl 1 "$BIGMAC" train tests/specs/design-example.json --reference
expect_contains train_needs_impl_hint 'hint: add "impl"'

# a generator whose loss does not reach the backbone still trains (no gradient into gpt from it)
sed 's/"grad_to_backbone": true/"grad_to_backbone": false/' "$spec" >"$TEST_TMP/nog2b.json"
expect_exit train_no_grad_to_backbone 0 "$BIGMAC" train "$TEST_TMP/nog2b.json" --reference --steps 2

#!/usr/bin/env bash
# test_examples.sh — the paper-shaped example workloads (examples/*.json, docs/workloads.md)
# load, plan and verify under every policy, for both backbone schedules, and simulate with
# --compare --json. Checks shape and exit codes only: the makespans are what the planner
# produces (bench/RESULTS.md records them), never asserted here.
. "$(dirname "$0")/lib.sh"

POLICIES="bigmac optimus unified unified-balanced ideal none"
for spec in examples/understanding-qwen3-30b-a3b.json examples/generation-mmdit-20b.json \
            examples/tiny-mllm.json examples/tiny-mllm-2enc.json; do
    n=$(basename "$spec" .json)
    # the spec's own schedule (interleaved) and 1f1b
    for sched in "" "--backbone 1f1b --vpp 1"; do
        tag=$n${sched:+-1f1b}
        for p in $POLICIES; do
            tab="$TEST_TMP/$tag-$p.json"
            # shellcheck disable=SC2086
            expect_exit "plan_${tag}_$p" 0 "$BIGMAC" plan "$spec" --policy "$p" $sched -o "$tab"
            expect_exit "verify_${tag}_$p" 0 "$BIGMAC" verify "$tab"
            expect_contains "verify_${tag}_${p}_ok" ": OK"
        done
        # shellcheck disable=SC2086
        OUT_TXT=$("$BIGMAC" simulate "$spec" --compare --json $sched 2>&1); rc=$?
        [ $rc -eq 0 ] && echo "PASS simulate_${tag}_exit" || echo "FAIL simulate_${tag}_exit: $rc"
        expect_contains "simulate_${tag}_bound" '"zero_bubble_bound_ms": '
        for p in $POLICIES; do
            expect_contains "simulate_${tag}_has_$p" "\"policy\": \"$p\""
        done
        if printf '%s' "$OUT_TXT" | grep -q '"error": '; then
            echo "FAIL simulate_${tag}_no_error"; printf '%s\n' "$OUT_TXT" | grep '"error"' | head -3
        else echo "PASS simulate_${tag}_no_error"; fi
    done
done

# The spec's documented figures are what scripts/derive-workloads.sh prints (the derivation
# and the example files must not drift apart).
d=$(bash scripts/derive-workloads.sh)
for spec in examples/understanding-qwen3-30b-a3b.json:2 examples/generation-mmdit-20b.json:3; do
    want=${spec##*:}; spec=${spec%:*}
    bad=0 seen=0
    while IFS= read -r cost; do
        seen=$((seen + 1))
        printf '%s' "$d" | grep -qF -- "$cost" || { bad=1; echo "    $spec: $cost not derived"; }
    done < <(grep -o '"cost": {[^}]*}' "$spec")
    n=$(basename "$spec" .json)
    [ $bad -eq 0 ] && [ $seen -eq "$want" ] && echo "PASS costs_derived_$n" ||
        echo "FAIL costs_derived_$n ($seen cost objects, wanted $want)"
done

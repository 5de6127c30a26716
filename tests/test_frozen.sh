#!/usr/bin/env bash
# test_frozen.sh — frozen modules ("trainable": false) through the CLI and under mpirun
# (docs/spec.md "Frozen modules"): `bigmac plan` of tiny-mllm with a frozen ViT has no ViT B/W
# ops and verifies, the simulated encoder activation is 0 at every M; `mpirun -np 2 bigmac
# train` with the ViT frozen keeps the ViT's parameters bit for bit and equals `train
# --reference` trained with the ViT frozen (losses and parameters within 1e-4); with the
# backbone and the generator frozen the ViT still trains (its gradient goes through both) and
# the backbone's and generator's parameters stay bit for bit; the same over 2 data-parallel replicas.
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
T=$TEST_TMP/frozen
mkdir -p "$T"
STEPS=3

# variant NAME MODULES... : examples/tiny-mllm.json with those modules frozen, as $T/NAME.json
variant() {
    local name=$1; shift
    /usr/bin/python3 - "$T/$name.json" "$@" <<'EOF'
import json, sys
s = json.load(open("examples/tiny-mllm.json"))
for m in s["modules"]:
    if m["name"] in sys.argv[2:]:
        m["trainable"] = False
json.dump(s, open(sys.argv[1], "w"), indent=1)
EOF
}
variant vit vit
variant bbgen gpt dit
variant all vit gpt dit

# plan: no ViT B or W, the backbone's ops all there; verify passes
expect_exit plan_frozen_vit 0 "$BIGMAC" plan "$T/vit.json" --backbone zb-h1 --vpp 1 -o "$T/vit_table.json"
if grep -q '"module": "vit", "pass": "[BW]"' "$T/vit_table.json"; then echo "FAIL plan_has_no_vit_backward"
elif grep -q '"module": "vit", "pass": "F"' "$T/vit_table.json" &&
     grep -q '"module": "gpt", "pass": "W"' "$T/vit_table.json"; then echo "PASS plan_has_no_vit_backward"
else echo "FAIL plan_has_no_vit_backward: forwards or the backbone's W missing"; fi
expect_exit verify_frozen_vit 0 "$BIGMAC" verify "$T/vit_table.json"
expect_contains verify_proves_residency 'invariants 1-5 hold'
grep -q '"trainable": false' "$T/vit_table.json" && echo "PASS table_keeps_trainable_false" ||
    echo "FAIL table_keeps_trainable_false"

# simulate: the encoder column (enc GiB) is 0 on every rank at every M, for every policy
bad=0
for pol in bigmac optimus unified ideal; do
    for M in 4 8 16 32; do
        out=$("$BIGMAC" simulate "$T/vit.json" --pp 4 --vpp 1 --backbone 1f1b --policy $pol --microbatches $M 2>&1) || bad=1
        enc=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 11 {print $8}' | sort -u)
        [ "$enc" = "0.000" ] || { bad=1; echo "    $pol M=$M: enc GiB '$enc'"; }
    done
done
[ $bad = 0 ] && echo "PASS simulated_encoder_activation_zero_every_m" || echo "FAIL simulated_encoder_activation_zero_every_m"

# the frozen examples plan and verify under every policy, on their schedule and 1f1b; the
# frozen ViT keeps no activation (enc GiB 0) under bigmac, the projector-only LLM keeps B, no W
for spec in examples/understanding-qwen3-30b-a3b-frozen-vit.json examples/understanding-qwen3-30b-a3b-projector-only.json; do
    n=$(basename "$spec" .json)
    for sched in "" "--backbone 1f1b --vpp 1" "--backbone zb-v"; do
        tag=$n${sched:+-$(echo $sched | cut -d' ' -f2)}
        for p in bigmac optimus unified unified-balanced ideal none; do
            # shellcheck disable=SC2086
            expect_exit "plan_${tag}_$p" 0 "$BIGMAC" plan "$spec" --policy "$p" $sched -o "$T/ex.json"
            expect_exit "verify_${tag}_$p" 0 "$BIGMAC" verify "$T/ex.json"
            if grep -q '"module": "vit", "pass": "[BW]"' "$T/ex.json"; then echo "FAIL no_vit_backward_${tag}_$p"
            else echo "PASS no_vit_backward_${tag}_$p"; fi
            if grep -q '"module": "llm", "pass": "W"' "$T/ex.json" && [ "$n" != "${n%projector-only}" ]; then
                echo "FAIL no_llm_w_${tag}_$p"; fi
        done
    done
done
enc=$("$BIGMAC" simulate examples/understanding-qwen3-30b-a3b-frozen-vit.json | awk '$1 ~ /^[0-9]+$/ && NF == 11 {print $8}' | sort -u)
[ "$enc" = "0.000" ] && echo "PASS frozen_vit_example_encoder_zero" || echo "FAIL frozen_vit_example_encoder_zero: '$enc'"

if ! command -v mpirun >/dev/null; then
    echo "SKIP frozen_mpi: no mpirun (make deps installs openmpi-bin)"
    exit 0
fi
mpi() { timeout 90 mpirun --oversubscribe -np 2 "$BIGMAC" "$@"; }

# All frozen: nothing moves, so its dump is the initial parameters (the reference's too).
"$BIGMAC" train "$T/all.json" --reference --steps 1 --dump-params "$T/init.bin" >/dev/null 2>&1
expect_exit train_all_frozen 0 mpi train "$T/all.json" --pp 2 --vpp 1 --backbone 1f1b --steps 1 --quiet \
    --dump-params "$T/all.bin"
cmp -s "$T/init.bin" "$T/all.bin" && echo "PASS all_frozen_parameters_are_the_initial_ones" ||
    echo "FAIL all_frozen_parameters_are_the_initial_ones"

# The ViT is the first module of the dump (spec order): 29136 floats = 116544 bytes
# (vit.c: patch 32x48 + 32, positions 16x32, 2 blocks x 12704, final LN 2x32, projection 48x32 + 48).
VIT_BYTES=116544
for bb in 1f1b zb-h1; do
    "$BIGMAC" train "$T/vit.json" --reference --steps $STEPS --log "$T/ref_vit.log" --dump-params "$T/ref_vit.bin" >/dev/null 2>&1
    if mpi train "$T/vit.json" --pp 2 --vpp 1 --backbone $bb --steps $STEPS --quiet --log "$T/vit_$bb.log" \
           --dump-params "$T/vit_$bb.bin" >"$T/vit_$bb.out" 2>&1; then
        losses_match "frozen_vit_${bb}_losses_match_reference" "$T/vit_$bb.log" "$T/ref_vit.log"
        params_match "frozen_vit_${bb}_params_match_reference" "$T/vit_$bb.bin" "$T/ref_vit.bin"
        cmp -s -n $VIT_BYTES "$T/vit_$bb.bin" "$T/init.bin" && echo "PASS frozen_vit_${bb}_vit_unchanged" ||
            echo "FAIL frozen_vit_${bb}_vit_unchanged"
        cmp -s "$T/vit_$bb.bin" "$T/init.bin" && echo "FAIL frozen_vit_${bb}_rest_trains" ||
            echo "PASS frozen_vit_${bb}_rest_trains"
        if [ "$(grep -c '"encoder": 0,' "$T/vit_$bb.log")" = $STEPS ] &&
           ! grep -q '"encoder": [1-9]' "$T/vit_$bb.log"; then echo "PASS frozen_vit_${bb}_measured_encoder_bytes_zero"
        else echo "FAIL frozen_vit_${bb}_measured_encoder_bytes_zero"; fi
    else
        echo "FAIL frozen_vit_${bb}_train"; sed 's/^/    /' "$T/vit_$bb.out" | head -10
    fi
done

# Backbone and generator frozen, the ViT trains: its gradient passes through both.
"$BIGMAC" train "$T/bbgen.json" --reference --steps $STEPS --log "$T/ref_bbgen.log" --dump-params "$T/ref_bbgen.bin" >/dev/null 2>&1
for bb in 1f1b zb-h1; do
    if mpi train "$T/bbgen.json" --pp 2 --vpp 1 --backbone $bb --steps $STEPS --quiet --log "$T/bbgen_$bb.log" \
           --dump-params "$T/bbgen_$bb.bin" >"$T/bbgen_$bb.out" 2>&1; then
        losses_match "frozen_backbone_${bb}_losses_match_reference" "$T/bbgen_$bb.log" "$T/ref_bbgen.log"
        params_match "frozen_backbone_${bb}_params_match_reference" "$T/bbgen_$bb.bin" "$T/ref_bbgen.bin"
        cmp -s -n $VIT_BYTES "$T/bbgen_$bb.bin" "$T/init.bin" && echo "FAIL frozen_backbone_${bb}_vit_trains" ||
            echo "PASS frozen_backbone_${bb}_vit_trains"
        cmp -s -i $VIT_BYTES "$T/bbgen_$bb.bin" "$T/init.bin" && echo "PASS frozen_backbone_${bb}_backbone_and_generator_unchanged" ||
            echo "FAIL frozen_backbone_${bb}_backbone_and_generator_unchanged"
    else
        echo "FAIL frozen_backbone_${bb}_train"; sed 's/^/    /' "$T/bbgen_$bb.out" | head -10
    fi
done

# Data parallel (2 pipelines of 2 ranks): frozen modules take no part in the gradient
# all-reduce and no step; the result equals the reference over D replicas with the same frozen.
for name in vit bbgen; do
    "$BIGMAC" train "$T/$name.json" --reference --dp 2 --steps $STEPS --log "$T/ref_dp_$name.log" \
        --dump-params "$T/ref_dp_$name.bin" >/dev/null 2>&1
    if timeout 120 mpirun --oversubscribe -np 4 "$BIGMAC" train "$T/$name.json" --pp 2 --vpp 1 --backbone 1f1b --dp 2 \
           --steps $STEPS --quiet --log "$T/dp_$name.log" --dump-params "$T/dp_$name.bin" >"$T/dp_$name.out" 2>&1; then
        losses_match "frozen_${name}_dp2_losses_match_reference" "$T/dp_$name.log" "$T/ref_dp_$name.log"
        params_match "frozen_${name}_dp2_params_match_reference" "$T/dp_$name.bin" "$T/ref_dp_$name.bin"
        if [ $name = vit ]; then
            cmp -s -n $VIT_BYTES "$T/dp_$name.bin" "$T/init.bin" && echo "PASS frozen_vit_dp2_vit_unchanged" ||
                echo "FAIL frozen_vit_dp2_vit_unchanged"
        else
            cmp -s -i $VIT_BYTES "$T/dp_$name.bin" "$T/init.bin" && echo "PASS frozen_bbgen_dp2_unchanged" ||
                echo "FAIL frozen_bbgen_dp2_unchanged"
        fi
    else
        echo "FAIL frozen_${name}_dp2_train"; sed 's/^/    /' "$T/dp_$name.out" | head -10
    fi
done

# the HTML report's legend marks the frozen ViT and has no ViT backward swatch
"$BIGMAC" render "$T/vit_table.json" --format html -o "$T/vit.html" >/dev/null 2>&1
if grep -q 'vit forward (frozen)' "$T/vit.html" && ! grep -q 'vit backward' "$T/vit.html" &&
   grep -q 'gpt backward' "$T/vit.html"; then echo "PASS html_legend_marks_frozen"; else echo "FAIL html_legend_marks_frozen"; fi

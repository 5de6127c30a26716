#!/usr/bin/env bash
# examples/custom_encoder.c: a custom encoder registered through bm_module_register trains
# pipelined under mpirun (through bm_train_main) with the same losses as the reference trainer.
cd "$(dirname "$0")/.."
. tests/lib.sh
mpi_env
EX="${TEST_BUILD:-build}/examples/custom_encoder"
SPEC=examples/custom-encoder.json
if ! command -v mpirun >/dev/null; then echo "SKIP custom_encoder: no mpirun (make deps installs openmpi-bin)"; exit 0; fi

expect_exit custom_encoder_reference 0 "$EX" $SPEC --reference --steps 4 --log "$TEST_TMP/ce_ref.log"
for pol in bigmac optimus; do
    expect_exit custom_encoder_mpi_$pol 0 timeout 60 mpirun --oversubscribe -np 2 "$EX" $SPEC --policy $pol --steps 4 \
        --log "$TEST_TMP/ce_$pol.log"
    expect_contains custom_encoder_mpi_${pol}_progress "step    4/4"
    a=$(sed 's/.*"loss": \([^,]*\),.*/\1/' "$TEST_TMP/ce_$pol.log" | tr '\n' ' ')
    b=$(sed 's/.*"loss": \([^,]*\),.*/\1/' "$TEST_TMP/ce_ref.log" | tr '\n' ' ')
    if [ -n "$a" ] && echo "$a|$b" | awk -F'|' '{n=split($1,x," "); m=split($2,y," "); if(n!=m||n!=4)exit 1;
            for(i=1;i<=n;i++){d=x[i]-y[i]; if(d<0)d=-d; if(d>1e-4*y[i])exit 1}}'; then echo "PASS custom_encoder_${pol}_losses_equal_reference"; else
        echo "FAIL custom_encoder_${pol}_losses_equal_reference: $a vs $b"; fi
done
first=$(head -1 "$TEST_TMP/ce_bigmac.log" | sed 's/.*"loss": \([^,]*\),.*/\1/')
last=$(tail -1 "$TEST_TMP/ce_bigmac.log" | sed 's/.*"loss": \([^,]*\),.*/\1/')
if awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < a)}'; then echo "PASS custom_encoder_loss_falls"; else
    echo "FAIL custom_encoder_loss_falls: $first -> $last"; fi
expect_exit custom_encoder_unknown_impl_without_registration 1 "$BIGMAC" train $SPEC --local --steps 1
expect_contains custom_encoder_unknown_impl_message 'unknown impl "patchmlp"'

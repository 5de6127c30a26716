#!/usr/bin/env bash
# test_limits.sh — absurd input gets a clear error fast: never an OOM crash, a hang or minutes of
# work. Every command runs under `timeout 10` (exit 124, a failure, when it takes longer) and
# must exit with the expected status and say why. docs/hardening.md lists the limits.
. "$(dirname "$0")/lib.sh"

T=$TEST_TMP/limits
mkdir -p "$T"
SPEC=examples/tiny-mllm.json

# limit NAME CODE TEXT CMD... : CMD exits CODE within 10 s (LIMIT_S) and its output contains TEXT.
limit() {
    local name=$1 code=$2 text=$3; shift 3
    expect_exit "$name" "$code" timeout "${LIMIT_S:-10}" "$@"
    expect_contains "${name}_says_why" "$text"
}

# spec_with SED_EXPR FILE : tiny-mllm with one substitution.
spec_with() { sed "$1" "$SPEC" >"$2"; }

# a spec with a continuous backbone split (no "layers"), so any pp is plannable
spec_with 's/"layers": 8,//' "$T/nolayers.json"

# ---------------------------------------------------------------- ranks and microbatches

spec_with 's/"pp": 4,/"pp": 100000,/' "$T/pp.json"
limit spec_pp_100000 1 'parallel.pp is 100000, more than the limit 4096' "$BIGMAC" plan "$T/pp.json"
limit flag_pp_100000 1 'pp = 100000: must be in 1..4096' "$BIGMAC" plan "$SPEC" --pp 100000
spec_with 's/"microbatches": 8}/"microbatches": 1000000000}/' "$T/mb.json"
limit spec_microbatches_1e9 1 'parallel.microbatches is 1000000000, more than the limit 1000000' \
    "$BIGMAC" plan "$T/mb.json"
limit flag_microbatches_1e9 1 'microbatches = 1000000000: must be in 1..1000000' \
    "$BIGMAC" plan "$SPEC" --microbatches 1000000000
limit flag_microbatches_overflow 2 "expected a positive integer, got '99999999999999999999'" \
    "$BIGMAC" plan "$SPEC" --microbatches 99999999999999999999
limit flag_pp_float 2 "--pp: expected a positive integer, got '1e9'" "$BIGMAC" plan "$SPEC" --pp 1e9

# each count within its limit, the product not
limit flag_plan_too_large 1 'plan too large: pp*vpp*microbatches = 1024*1*4096' \
    "$BIGMAC" plan "$T/nolayers.json" --backbone 1f1b --vpp 1 --pp 1024 --microbatches 4096
limit flag_plan_too_large_interleaved 1 'backbone ops per pass (limit 1048576)' \
    "$BIGMAC" plan "$T/nolayers.json" --pp 4096 --vpp 64 --microbatches 4096
sed 's/"parallel": {[^}]*}/"parallel": {"pp": 4096, "vpp": 1, "microbatches": 1000000}/; s/"interleaved"/"1f1b"/; s/"layers": 8,//' \
    "$SPEC" >"$T/product.json"
limit spec_plan_too_large 1 'plan too large' "$BIGMAC" plan "$T/product.json"
limit flag_window_int_max 0 'W=2' "$BIGMAC" plan "$SPEC" --unit 4 --window 2147483647

# ---------------------------------------------------------------- names and nesting

# 10 MB module name: over the spec's 8 MiB text limit, rejected before parsing
{ printf '{"format": "bigmac-spec", "version": 1, "inputs": ["t"], "modules": [{"name": "'
  head -c 10485760 /dev/zero | tr '\0' a
  printf '", "consumes": ["t"], "produces": ["h"]}]}'; } >"$T/name10m.json"
limit spec_name_10mb 1 'a spec may be at most 8 MiB' "$BIGMAC" plan "$T/name10m.json"
# 1 MB name: within the text limit, over the 200-byte name limit
{ printf '{"format": "bigmac-spec", "version": 1, "inputs": ["t"], "modules": [{"name": "'
  head -c 1000000 /dev/zero | tr '\0' a
  printf '", "consumes": ["t"], "produces": ["h"]}]}'; } >"$T/name1m.json"
limit spec_name_1mb 1 'is 1000000 bytes long; the limit is 200' "$BIGMAC" plan "$T/name1m.json"
# a table whose module name is 10 MB (tables may be 1 GiB)
{ printf '{"format": "bigmac-table", "version": 1, "pp": 1, "microbatches": 1, "backbone": "1f1b", "policy": "none", "modules": [{"name": "'
  head -c 10485760 /dev/zero | tr '\0' a
  printf '", "role": "backbone"}], "ranks": [{"rank": 0, "ops": []}]}'; } >"$T/tname10m.json"
limit table_name_10mb 1 'a module name is 10485760 bytes long; the limit is 200' \
    "$BIGMAC" verify "$T/tname10m.json"

# 100000 levels of nesting: rejected by a scan before jansson's recursive parser sees it
deep() { head -c 100000 /dev/zero | tr '\0' '['; head -c 100000 /dev/zero | tr '\0' ']'; }
deep >"$T/deep.json"
limit spec_deep_100000 1 'JSON nested deeper than 64 levels' "$BIGMAC" plan "$T/deep.json"
limit table_deep_100000 1 'JSON nested deeper than 64 levels' "$BIGMAC" verify "$T/deep.json"
{ printf '{"format": "bigmac-table", "version": 1, "pp": 1, "ranks": '; deep; printf '}'; } >"$T/tdeep.json"
limit table_deep_inside 1 'JSON nested deeper than 64 levels' "$BIGMAC" verify "$T/tdeep.json"

# ---------------------------------------------------------------- big files

# 100 MB file as a spec, 1100 MB as a table (sparse: the size check comes before reading)
truncate -s 100M "$T/big.json"
truncate -s 1100M "$T/huge.json"
limit table_1100mb 1 'a table may be at most 1024 MiB' "$BIGMAC" verify "$T/huge.json"
limit render_1100mb 1 'the file is 1153433600 bytes (1100 MiB); the limit here is 1024 MiB' \
    "$BIGMAC" render "$T/huge.json" --format ascii
limit spec_100mb 1 'a spec may be at most 8 MiB' "$BIGMAC" plan "$T/big.json"
# endless input: /dev/zero and a pipe have no size to check; reading stops at the limit
# (reading the 1 GiB a table or trace may have takes 1-2 s, 6-7 s and 2.2 GB under ASan: 30 s)
LIMIT_S=30 limit table_dev_zero 1 'more than 1073741824 bytes' "$BIGMAC" verify /dev/zero
limit spec_dev_zero 1 'more than 8388608 bytes' "$BIGMAC" plan /dev/zero
LIMIT_S=30 limit render_dev_zero 1 'more than 1073741824 bytes' "$BIGMAC" render /dev/zero --format ascii
LIMIT_S=30 limit csv_dev_zero 1 'more than 1073741824 bytes' "$BIGMAC" plan --from-csv /dev/zero
LIMIT_S=30 limit table_pipe_1100mb 1 'more than 1073741824 bytes' \
    "$BIGMAC" verify <(head -c 1153433600 /dev/zero)
# a tiny header claiming a huge schedule (made the verifier allocate 1.7 GB)
limit table_huge_header 1 'pp*vpp*microbatches = 4096*64*1000000 is more than the limit' \
    "$BIGMAC" verify tests/corpus/table/invalid-huge-header.json
printf '{"format": "bigmac-table", "version": 1, "pp": 1, "microbatches": 1, "unit": 1000000, "window": 1000000, "backbone": "1f1b", "policy": "bigmac", "modules": [{"name": "b", "role": "backbone"}], "ranks": [{"rank": 0, "ops": []}]}' >"$T/twin.json"
limit table_window_unit 1 'window*ceil(unit/pp) = 1000000*1000000 is more than 1000000' \
    "$BIGMAC" verify "$T/twin.json"

# ---------------------------------------------------------------- numbers

spec_with 's/"fwd_ms": 8,/"fwd_ms": 1e308,/' "$T/n1.json"
limit spec_cost_1e308 1 'cost.fwd_ms must be <= 1e+09, got 1e+308' "$BIGMAC" plan "$T/n1.json"
spec_with 's/"act_mib": 8,/"act_mib": 1e308,/' "$T/n2.json"
limit spec_memory_1e308 1 'cost.act_mib must be <= 1e+12, got 1e+308' "$BIGMAC" plan "$T/n2.json"
spec_with 's/"fwd_ms": 8,/"fwd_ms": 1e309,/' "$T/n3.json"
limit spec_cost_1e309 1 'real number overflow' "$BIGMAC" plan "$T/n3.json"
spec_with 's/"link_gbytes_per_s": 5,/"link_gbytes_per_s": 1e-308,/' "$T/n4.json"
limit spec_link_1e-308 1 'device.link_gbytes_per_s must be >= 1e-06' "$BIGMAC" plan "$T/n4.json"
spec_with 's/"max": 2.0/"max": 1e308/' "$T/n5.json"
limit spec_scale_1e308 1 'encoder_cost_scale.max must be <= 1e+06' "$BIGMAC" plan "$T/n5.json"
printf '{"format": "bigmac-spec", "version": 1, "inputs": ["t"], "modules": [{"name": "gpt", "consumes": ["t"], "produces": ["h"], "arch": {"params": 1e308, "tokens": 100, "hidden": 10}}]}' >"$T/n6.json"
limit spec_arch_1e308 1 'the costs derived from "arch" of module "gpt" are out of range' \
    "$BIGMAC" plan "$T/n6.json"
spec_with 's/"pp": 4,/"pp": 1e308,/' "$T/n7.json"
limit spec_pp_1e308 1 'parallel.pp must be an integer' "$BIGMAC" plan "$T/n7.json"
sed 's/"bwd_ms": 2}/"bwd_ms": 1e308}/' tests/corpus/table/valid-tiny-bigmac-p2-v2-m4.json >"$T/t1.json"
grep -q 1e308 "$T/t1.json" || sed -i 's/"bwd_ms": 2,/"bwd_ms": 1e308,/' "$T/t1.json"
limit table_cost_1e308 1 'is 1e+308, more than the limit 1e+12' "$BIGMAC" verify "$T/t1.json"
sed 's/"chunk_layers": \[[0-9]*/"chunk_layers": [1e308/' tests/corpus/table/valid-tiny-bigmac-p2-v2-m4.json >"$T/t2.json"
limit table_chunk_layers_1e308 1 '"chunk_layers" entries must be integers' "$BIGMAC" verify "$T/t2.json"

# negative zero: an integer 0 where >= 1 is needed, a -0.0 where > 0 is needed, fine where 0 is
spec_with 's/"pp": 4,/"pp": -0,/' "$T/z1.json"
limit spec_pp_negative_zero 1 'parallel.pp must be an integer >= 1, got 0' "$BIGMAC" plan "$T/z1.json"
spec_with 's/"fwd_ms": 8,/"fwd_ms": -0.0,/' "$T/z2.json"
limit spec_cost_negative_zero 1 'cost.fwd_ms must be > 0, got -0' "$BIGMAC" plan "$T/z2.json"
spec_with 's/"act_mib": 8,/"act_mib": -0.0,/' "$T/z3.json"
limit spec_memory_negative_zero_ok 0 'nominal makespan' "$BIGMAC" plan "$T/z3.json"
limit flag_pp_negative_zero 2 "--pp: expected a positive integer, got '-0'" "$BIGMAC" plan "$SPEC" --pp -0

# NaN-like values: bare tokens are not JSON; strings are not numbers; flags want integers
spec_with 's/"fwd_ms": 8,/"fwd_ms": NaN,/' "$T/nan1.json"
limit spec_bare_nan 1 'invalid JSON' "$BIGMAC" plan "$T/nan1.json"
spec_with 's/"fwd_ms": 8,/"fwd_ms": -Infinity,/' "$T/nan2.json"
limit spec_bare_infinity 1 'invalid JSON' "$BIGMAC" plan "$T/nan2.json"
spec_with 's/"fwd_ms": 8,/"fwd_ms": "NaN",/' "$T/nan3.json"
limit spec_string_nan 1 'cost.fwd_ms must be a number, got a string ("NaN")' "$BIGMAC" plan "$T/nan3.json"
spec_with 's/"microbatches": 8}/"microbatches": "inf"}/' "$T/nan4.json"
limit spec_string_inf 1 'parallel.microbatches must be an integer' "$BIGMAC" plan "$T/nan4.json"
limit flag_microbatches_nan 2 "expected a positive integer, got 'nan'" \
    "$BIGMAC" plan "$SPEC" --microbatches nan
limit flag_window_inf 2 "expected a positive integer, got 'inf'" "$BIGMAC" plan "$SPEC" --window inf
sed 's/"mb_scale": \[[0-9.]*/"mb_scale": [NaN/' tests/corpus/table/valid-tiny-bigmac-p2-v2-m4.json >"$T/tnan.json"
limit table_bare_nan 1 'invalid JSON' "$BIGMAC" verify "$T/tnan.json"

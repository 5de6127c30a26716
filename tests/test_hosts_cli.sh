#!/usr/bin/env bash
# test_hosts_cli.sh — placement over hosts from the command line (docs/multihost.md):
# tests/specs/hosts-p8.json puts all 8 ranks on one host (ranks_per_host 8); --ranks-per-host 4
# splits them over two, so the 2 x 8 transfers over the 3|4 boundary (one per microbatch and
# direction) take the 1 GB/s inter-host link: simulate says so and costs more, --json and sweep
# carry it, the HTML report has a Hosts section, a planned table keeps it (JSON and CSV), bad
# values are refused by name; a run whose ranks are not where the plan says gets a warning.
cd "$(dirname "$0")/.."
. tests/lib.sh
SPEC=tests/specs/hosts-p8.json
T=$TEST_TMP/hosts_cli
mkdir -p "$T"
ms() { sed -n 's/^makespan \([0-9.]*\) ms.*/\1/p'; }

expect_exit hosts_one_host 0 "$BIGMAC" simulate $SPEC
one=$(printf '%s\n' "$OUT_TXT" | ms)
expect_contains hosts_one_host_line "hosts 1 (8 ranks per host"
expect_contains hosts_one_host_nothing_crosses ": 0 of 112 transfers cross hosts"
expect_exit hosts_two_hosts 0 "$BIGMAC" simulate $SPEC --ranks-per-host 4
two=$(printf '%s\n' "$OUT_TXT" | ms)
# 32 MiB at 1 GB/s + 100 us = 33.654 ms per crossing transfer, 16 of them
expect_contains hosts_two_hosts_line "hosts 2 (4 ranks per host; between hosts 1 GB/s, 100 us): 16 of 112 transfers cross hosts, 512.000 MiB, 538.471 ms in flight (5.529 ms on the intra-host link)"
# every microbatch's forward and backward crosses once: at least 2 x 33.654 ms more (and the
# intra-host transfer it replaces was 0.346 ms)
if [ -n "$one" ] && [ -n "$two" ] && awk "BEGIN{exit !($two >= $one + 2 * (33.654 - 0.346) - 1e-3)}"; then
    echo "PASS hosts_two_hosts_cost_more"; else echo "FAIL hosts_two_hosts_cost_more: $one -> $two ms"; fi
expect_exit hosts_json 0 "$BIGMAC" simulate $SPEC --ranks-per-host 4 --json
expect_contains hosts_json_crossing '"cross_host_transfers": 16'
expect_exit hosts_sweep 0 "$BIGMAC" sweep $SPEC --ranks-per-host 2 --pp 4,8
expect_contains hosts_sweep_placement "placement: 2 ranks per host (rank r on host r / 2); between hosts 1 GB/s, 100 us"
expect_exit hosts_plan_table 0 "$BIGMAC" plan $SPEC --ranks-per-host 4 -o "$T/t.json" --csv "$T/t.csv"
if grep -q '"ranks_per_host": 4, "inter_host_gbytes_per_s": 1, "inter_host_latency_us": 100}' "$T/t.json" &&
   grep -q '^# device .* ranks_per_host=4 inter_host_gbytes_per_s=1 inter_host_latency_us=100$' "$T/t.csv"; then
    echo "PASS hosts_table_keeps_placement"; else echo "FAIL hosts_table_keeps_placement"; fi
# the table and its CSV simulate to the spec's makespan (render reads both)
for f in t.json t.csv; do
    expect_exit "hosts_render_$f" 0 "$BIGMAC" render "$T/$f" --format ascii
    expect_contains "hosts_render_${f}_makespan" "$two ms"
done
# the HTML report has a Hosts section for a placed table, none for tiny-mllm (one host)
"$BIGMAC" render $SPEC --ranks-per-host 4 --format html -o "$T/h.html" >/dev/null 2>&1
if grep -q '<p id="hosts">2 hosts of 4 ranks (rank r on host r / 4); between hosts 1 GB/s, 100 us: 16 of 112 transfers cross hosts' "$T/h.html" &&
   ! "$BIGMAC" render examples/tiny-mllm.json --format html 2>/dev/null | grep -q 'id="hosts"'; then
    echo "PASS hosts_html_section"; else echo "FAIL hosts_html_section"; fi
expect_exit hosts_flag_zero_refused 2 "$BIGMAC" simulate $SPEC --ranks-per-host 0
expect_contains hosts_flag_zero_message "--ranks-per-host: expected a positive integer, got '0'"
sed 's/"ranks_per_host": 8//; s/"inter_host_latency_us": 100,/"inter_host_latency_us": 100/' $SPEC >"$T/nohosts.json"
expect_exit hosts_inter_host_without_placement 1 "$BIGMAC" simulate "$T/nohosts.json"
expect_contains hosts_inter_host_without_placement_message "device.inter_host_gbytes_per_s describes the link between hosts, but device.ranks_per_host is not given"

# train under mpirun on this one host with a plan that says two hosts: rank 0 warns (the run
# itself is unaffected)
if command -v mpirun >/dev/null; then
    export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    expect_exit hosts_train_placement_mismatch 0 timeout 60 mpirun --oversubscribe -np 4 "$BIGMAC" train \
        examples/tiny-mllm.json --steps 1 --quiet --ranks-per-host 2
    expect_contains hosts_train_placement_mismatch_warns "bigmac: warning: device.ranks_per_host is 2 (rank r on host r / 2), but ranks 0 and 2 run on the same host"
fi

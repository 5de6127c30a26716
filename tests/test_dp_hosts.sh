#!/usr/bin/env bash
# test_dp_hosts.sh — the data-parallel layout in the simulator (issue 23): with D replicas,
# pipeline rank p of replica d is global rank p*D + d and device.ranks_per_host places global
# ranks, so the link class between pipeline neighbours follows the replicas' placement. Checked
# against hand-computed figures on tests/specs/hosts-p8.json (a backbone-only 1F1B pipeline,
# P = 8, M = 8: 1 ms forward per chunk, 32 MiB per transfer; intra-host 100 GB/s + 10 us =
# 0.346 ms, inter-host 1 GB/s + 100 us = 33.654 ms per transfer; 7 hops x 8 microbatches x
# 2 directions = 112 transfers).
cd "$(dirname "$0")/.."
. tests/lib.sh
SPEC=tests/specs/hosts-p8.json
lead() { # lead RANK : rank's lead idle (ms) from the last simulate's table
    printf '%s\n' "$OUT_TXT" | awk -v r="$1" '$1 == r && NF == 11 {print $4}'
}
near() { # near NAME GOT WANT : |GOT - WANT| <= 0.002
    if [ -n "$2" ] && awk "BEGIN{d=$2-($3); exit !(d <= 0.002 && d >= -0.002)}"; then echo "PASS $1"; else
        echo "FAIL $1: got '$2', wanted $3"; fi
}

# H = 4, D = 1: hosts {0-3}, {4-7}; only the 3|4 hop crosses: 16 transfers.
expect_exit dp1_h4 0 "$BIGMAC" simulate $SPEC --ranks-per-host 4
expect_contains dp1_h4_crossing "hosts 2 (4 ranks per host; between hosts 1 GB/s, 100 us): 16 of 112 transfers cross hosts"
# H = 4, D = 2: pipeline rank p runs on host (2p + d) / 4 = p / 2 for both replicas, so the
# hops 1|2, 3|4, 5|6 cross: 3 x 16 = 48 transfers, 16 ranks on 4 hosts.
expect_exit dp2_h4 0 "$BIGMAC" simulate $SPEC --ranks-per-host 4 --dp 2
expect_contains dp2_h4_crossing "hosts 4 (4 ranks per host; between hosts 1 GB/s, 100 us): 48 of 112 transfers cross hosts, 1536.000 MiB"
expect_contains dp2_h4_header "dp 2 (every replica walks this table; rank = p*2 + d)"
# rank 1 starts after F0 on rank 0 (1 ms) and an intra-host hop (0.346): 1.346; rank 2 after
# another forward and an inter-host hop: 1.346 + 1 + 33.654 = 36.000
near dp2_h4_rank1_lead "$(lead 1)" 1.346
near dp2_h4_rank2_lead "$(lead 2)" 36.000
near dp2_h4_rank3_lead "$(lead 3)" 37.346
# H = 4, D = 4: every replica of a stage fills a host, every hop crosses: 112 transfers, and
# rank p starts at p x (1 + 33.654) = 34.654 p
expect_exit dp4_h4 0 "$BIGMAC" simulate $SPEC --ranks-per-host 4 --dp 4
expect_contains dp4_h4_crossing "hosts 8 (4 ranks per host; between hosts 1 GB/s, 100 us): 112 of 112 transfers cross hosts"
near dp4_h4_rank1_lead "$(lead 1)" 34.654
near dp4_h4_rank2_lead "$(lead 2)" 69.309
# H = 2, D = 4: a stage's replicas span two hosts; still every hop crosses
expect_exit dp4_h2 0 "$BIGMAC" simulate $SPEC --ranks-per-host 2 --dp 4
expect_contains dp4_h2_crossing "hosts 16 (2 ranks per host; between hosts 1 GB/s, 100 us): 112 of 112 transfers cross hosts"
# H = 3, D = 2 (neither divides the other): replica 0 puts ranks 0,1 on host 0 (global 0, 2)
# but replica 1 puts rank 1 on host 1 (global 3): the hop 0|1 crosses in replica 1, so it is
# priced on the inter-host link (the step waits for the slowest replica). Crossing hops:
# 0|1 (g 1|3), 1|2 (2|4), 2|3 (5|7 and 4|6), 3|4 (7|9), 4|5 (8|10 and 9|11), 5|6 (11|13),
# 6|7 (13|15 and 12|14) — every hop: 112.
expect_exit dp2_h3 0 "$BIGMAC" simulate $SPEC --ranks-per-host 3 --dp 2
expect_contains dp2_h3_crossing "hosts 6 (3 ranks per host; between hosts 1 GB/s, 100 us): 112 of 112 transfers cross hosts"
# --json and the spec key say the same
expect_exit dp2_h4_json 0 "$BIGMAC" simulate $SPEC --ranks-per-host 4 --dp 2 --json
expect_contains dp2_h4_json_dp '"dp": 2'
expect_contains dp2_h4_json_crossing '"cross_host_transfers": 48'
T=$TEST_TMP/dp_hosts
mkdir -p "$T"
sed 's/"parallel": {/"parallel": {"dp": 2, /; s/"ranks_per_host": 8/"ranks_per_host": 4/' $SPEC >"$T/dp2.json"
expect_exit spec_dp_key 0 "$BIGMAC" simulate "$T/dp2.json"
expect_contains spec_dp_key_crossing "48 of 112 transfers cross hosts"
# a table keeps dp: render (which simulates it) agrees with simulate
"$BIGMAC" plan $SPEC --ranks-per-host 4 --dp 2 -o "$T/t.json" >/dev/null
expect_exit dp_table_renders 0 "$BIGMAC" simulate "$T/dp2.json" --table "$T/t.json"
expect_contains dp_table_keeps_placement "48 of 112 transfers cross hosts"
# sweep prices every configuration with the replicas' placement
expect_exit dp_sweep 0 "$BIGMAC" sweep $SPEC --ranks-per-host 4 --dp 2 --pp 8
expect_contains dp_sweep_placement "placement: 4 ranks per host (global rank g = p*2 + d on host g / 4, dp 2)"
expect_contains dp_sweep_makespan "453.691"
expect_exit dp_sweep_json 0 "$BIGMAC" sweep $SPEC --ranks-per-host 4 --dp 2 --pp 8 --json
expect_contains dp_sweep_json_dp '"dp": 2'
# render plans with --dp too: the trace embeds the table with its dp
expect_exit dp_render_trace 0 "$BIGMAC" render $SPEC --ranks-per-host 4 --dp 2 --format trace -o "$T/r.json"
if grep -q '"dp": 2' "$T/r.json"; then echo "PASS dp_render_table_has_dp"; else echo "FAIL dp_render_table_has_dp"; fi
# bad values
sed 's/"parallel": {/"parallel": {"dp": 1.5, /' $SPEC >"$T/bad.json"
expect_exit spec_dp_not_integer 1 "$BIGMAC" simulate "$T/bad.json"
expect_contains spec_dp_not_integer_names "parallel.dp"
expect_exit dp_flag_negative 2 "$BIGMAC" simulate $SPEC --dp -1

# test_frontier.sh — the memory-equal baseline of `simulate --compare` (optimus+recompute
# whenever optimus runs out of memory) and `sweep --frontier`: output shape, JSON keys, and
# that the marked points are the non-dominated ones (checked with awk, independent of bigmac).
. "$(dirname "$0")/lib.sh"
OOM_SPEC=tests/specs/recompute-oom.json   # qwen3 understanding at 56 GiB: optimus needs 59.8
FIT_SPEC=examples/tiny-mllm.json          # optimus fits

# ---- simulate --compare: optimus+recompute appears exactly when optimus is OOM, and fits
expect_exit cmp_oom_exit 0 "$BIGMAC" simulate "$OOM_SPEC" --compare
if printf '%s\n' "$OUT_TXT" | grep -Eq '^optimus +[0-9.]+ .* OOM$' &&
   printf '%s\n' "$OUT_TXT" | grep -Eq '^optimus\+recompute +[0-9.]+ .* no$'; then
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

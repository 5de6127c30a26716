#!/bin/bash
# bench_sweep_cluster.sh — `bigmac sweep SPEC --gpus N --global-batch B` on the paper-shaped
# workloads (issue 24): the top rows by samples/s of the whole step, the best row of each policy
# with and without the step's tail (walk_samples_per_s: the walk alone), and the time the sweep
# takes. Usage: bench/bench_sweep_cluster.sh [GPUS] [BATCH] [SPEC...]
# (default 64 512 on both examples; then the understanding example at 128 GPUs, 1024 samples).
set -u
BIGMAC=${BIGMAC:-bin/bigmac}
N=${1:-64}
B=${2:-512}
shift 2 2>/dev/null || shift $#
SPECS=("$@")
[ ${#SPECS[@]} -eq 0 ] && SPECS=(examples/understanding-qwen3-30b-a3b.json examples/generation-mmdit-20b.json)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for spec in "${SPECS[@]}"; do
    out=$TMP/$(basename "$spec" .json).json
    /usr/bin/time -f "%e %U" -o "$TMP/time" "$BIGMAC" sweep "$spec" --gpus "$N" --global-batch "$B" --json >"$out" 2>/dev/null
    read -r wall user <"$TMP/time"
    echo "== $spec, $N GPUs, $B samples per step: sweep took ${wall} s wall, ${user} s user"
    /usr/bin/python3 - "$out" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
fit = [r for r in j["rows"] if not r["oom"]]
print("%d configurations, %d fit in %.0f GiB" % (j["configs"], len(fit), j["mem_cap_gib"]))
hdr = "%3s %4s %4s %4s %4s %-17s %4s %4s %10s %10s %8s %8s %10s %10s %7s" % (
    "#", "pp", "dp", "vpp", "M", "policy", "win", "zero", "step ms", "walk ms", "sync ms", "optim", "samples/s",
    "walk s/s", "peak")
def line(i, r, walk_rank=None):
    return "%3d %4d %4d %4d %4d %-17s %4d %4d %10.1f %10.1f %8.1f %8.1f %10.2f %10.2f %7.1f" % (
        i, r["pp"], r["dp"], r["vpp"], r["microbatches"], r["policy"], r["window"], r["zero"], r["step_ms"],
        r["makespan_ms"], r["sync_exposed_ms"], r["optimizer_ms"], r["samples_per_s"], r["walk_samples_per_s"],
        r["peak_mem_gib"])
print("top 8 by samples/s of the step:")
print(hdr)
for i, r in enumerate(fit[:8]):
    print(line(i + 1, r))
walk = sorted(fit, key=lambda r: -r["walk_samples_per_s"])
print("top 5 by samples/s of the walk alone (the sync and optimizer left out):")
print(hdr)
for i, r in enumerate(walk[:5]):
    print(line(i + 1, r))
print("best row of each policy (step rank / walk rank), and at each dp:")
for pol in ("bigmac", "optimus", "unified", "unified-balanced"):
    rs = [r for r in fit if r["policy"] == pol]
    if not rs:
        continue
    b = rs[0]
    bw = max(rs, key=lambda r: r["walk_samples_per_s"])
    print("  %-17s step: pp %2d x dp %3d vpp %d zero %d %9.2f samples/s (rank %d, sync %.1f ms) | walk: pp %2d x dp %3d "
          "vpp %d %9.2f samples/s (rank %d)" % (
              pol, b["pp"], b["dp"], b["vpp"], b["zero"], b["samples_per_s"], fit.index(b) + 1, b["sync_exposed_ms"],
              bw["pp"], bw["dp"], bw["vpp"], bw["walk_samples_per_s"], walk.index(bw) + 1))
for dp in sorted({r["dp"] for r in fit}):
    rs = [r for r in fit if r["dp"] == dp]
    order = []
    for key in ("samples_per_s", "walk_samples_per_s"):
        best = {}
        for r in sorted(rs, key=lambda r: -r[key]):
            best.setdefault(r["policy"], r[key])
        order.append(" > ".join("%s %.2f" % kv for kv in best.items()))
    print("  dp %3d  step: %s\n          walk: %s" % (dp, order[0], order[1]))
EOF
done

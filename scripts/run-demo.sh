#!/usr/bin/env bash
# The embedded demo: plan the tiny example, train it pipelined on 4 MPI ranks with the bigmac
# policy (progress per step), record the last step as a Chrome trace and draw it as an HTML
# report.
#   out/table.json    the operator table (bigmac plan)
#   out/train.jsonl   one JSON line per step (loss, ms, peak activation bytes per rank and role)
#   out/trace.json    measured Chrome trace of the last step (Perfetto / chrome://tracing)
#   out/report.html   the trace as a self-contained HTML report
#   out/costs.json    the measured costs (bigmac calibrate) as a spec fragment
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BIGMAC:=bin/bigmac}"
: "${STEPS:=20}"
: "${NP:=4}"
export OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
mkdir -p out
"$BIGMAC" plan examples/tiny-mllm.json --pp "$NP" -o out/table.json
"$BIGMAC" verify out/table.json
echo
timeout 300 mpirun --oversubscribe -np "$NP" "$BIGMAC" train examples/tiny-mllm.json --table out/table.json \
    --steps "$STEPS" --log out/train.jsonl --trace out/trace.json
echo
"$BIGMAC" render out/trace.json --format ascii --width 100
"$BIGMAC" calibrate out/trace.json -o out/costs.json
"$BIGMAC" render out/trace.json --format html -o out/report.html

# The measured bubble ratio is the machine's as much as the schedule's when ranks outnumber
# cores: a rank that is ready but has no core counts as idle. The simulator's ratio for the same
# table (the spec's costs, one core per rank) is the schedule's own.
bubble_of() { sed -n 's/.*bubble ratio \([0-9.]*\).*/\1/p' | head -1; }
measured=$("$BIGMAC" render out/trace.json --format ascii --width 100 | bubble_of)
simulated=$("$BIGMAC" render out/table.json --format ascii --width 100 | bubble_of)
cores=$(nproc 2>/dev/null || echo 1)
echo
if [ "$NP" -gt "$cores" ]; then
    echo "note: $NP ranks share $cores cores, so each rank had a core about $((100 * cores / NP))% of the time;" \
         "the measured bubbles include that waiting (the machine, not the schedule)"
fi
echo "bubble ratio: measured ${measured:-?} (this run, $NP ranks on $cores cores), simulated ${simulated:-?} (the same table, one core per rank)"
echo
echo "operator table: out/table.json"
echo "training log:   out/train.jsonl"
echo "trace:          out/trace.json   (open in https://ui.perfetto.dev or chrome://tracing)"
echo "report:         out/report.html"
echo "costs:          out/costs.json   (bigmac calibrate)"

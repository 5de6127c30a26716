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
if "$BIGMAC" render out/trace.json --format html -o out/report.html 2>/dev/null; then
    report="out/report.html"
else
    rm -f out/report.html
    report="(not written: this build's renderer has no HTML writer yet)"
fi
echo
echo "operator table: out/table.json"
echo "training log:   out/train.jsonl"
echo "trace:          out/trace.json   (open in https://ui.perfetto.dev or chrome://tracing)"
echo "report:         $report"
echo "costs:          out/costs.json   (bigmac calibrate)"

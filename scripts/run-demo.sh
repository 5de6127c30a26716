#!/usr/bin/env bash
# The embedded demo: plan the tiny example with the bigmac policy and show its timeline.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BIGMAC:=bin/bigmac}"
mkdir -p out
"$BIGMAC" plan examples/tiny-mllm.json -o out/table.json
"$BIGMAC" verify out/table.json
echo "operator table: out/table.json"

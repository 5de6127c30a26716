#!/usr/bin/env bash
# bench_torch.sh — runs bench/bench_torch.py (the torch executor: encoder activation peaks of
# bigmac vs optimus at M = 32 and 128; step time vs the C executor and the profiled prediction).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
exec "${PYTHON:-/usr/bin/python3}" bench/bench_torch.py

#!/usr/bin/env bash
# bigmac.torch under faults (tests/python/faults_*.py, issue 27): timeouts, a stopped or killed
# rank named in one message, tagged user exceptions, outputs checked before step 1. Run by
# tests/test_python.sh's setup (the same PYTHONPATH, library and, under make asan, preloads); a
# file of its own so its minute of multi-process runs has its own time limit.
# suite: waits (tests/run.sh runs it in the lane beside the others: its time is spent waiting)
PY_TESTS='tests/python/faults_*.py' exec bash "$(dirname "$0")/test_python.sh"

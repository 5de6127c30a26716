#!/usr/bin/env bash
# The torch executor's measured activation peaks equal the simulator's (tests/python/peaks_*.py,
# issues 25 and 30). Run by tests/test_python.sh's setup (the same PYTHONPATH, library and, under
# make asan, preloads); a file of its own so its half minute of multi-process runs (P = 2 and 4,
# the command line) has its own time limit.
PY_TESTS='tests/python/peaks_*.py' exec bash "$(dirname "$0")/test_python.sh"

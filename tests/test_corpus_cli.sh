#!/usr/bin/env bash
# test_corpus_cli.sh — every file of the fuzz seed corpus (tests/corpus/) through the command line
# that reads it: specs through `plan`, tables through `verify`, CSV schedules through
# `plan --from-csv`, Chrome traces through `render --format ascii`. A valid-* file must succeed,
# an invalid-* (or crash-*, a fuzzer find) must fail with exit 1 and a "bigmac: error:" line,
# each within 10 s. Under `make asan` this replays every seed, and every crashing input kept
# after a fix, with the sanitizers on the real binary.
. "$(dirname "$0")/lib.sh"

run_file() {
    local kind=$1 f=$2
    case $kind in
        spec) timeout 10 "$BIGMAC" plan "$f" ;;
        table) timeout 10 "$BIGMAC" verify "$f" ;;
        csv) timeout 10 "$BIGMAC" plan --from-csv "$f" ;;
        trace) timeout 10 "$BIGMAC" render "$f" --format ascii --width 80 ;;
    esac
}

for kind in spec table csv trace; do
    for f in tests/corpus/$kind/*; do
        [ -f "$f" ] || continue
        base=$(basename "$f")
        case $base in valid-*) want=0 ;; *) want=1 ;; esac
        out=$(run_file "$kind" "$f" 2>&1)
        rc=$?
        name="corpus_${kind}_${base%.*}"
        if printf '%s' "$out" | grep -qE 'Sanitizer|runtime error'; then
            echo "FAIL $name: sanitizer report"
            printf '%s\n' "$out" | grep -E 'Sanitizer|runtime error|#[0-3] ' | head -8 | sed 's/^/    /'
        elif [ "$rc" -ne "$want" ]; then
            echo "FAIL $name: exit $rc, wanted $want"
            printf '%s\n' "$out" | head -5 | sed 's/^/    /'
        elif [ "$want" -eq 1 ] && ! printf '%s' "$out" | grep -q '^bigmac: error: '; then
            echo "FAIL $name: no \"bigmac: error:\" line"
            printf '%s\n' "$out" | head -5 | sed 's/^/    /'
        else
            echo "PASS $name"
        fi
    done
done

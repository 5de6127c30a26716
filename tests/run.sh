#!/usr/bin/env bash
# Runs every test binary (build/tests/test_*) and every shell test (tests/test_*.sh).
# Each prints "PASS name" / "FAIL name" lines; a binary that dies without reporting counts as
# one failure. A check that cannot run here (e.g. network namespaces without root) prints
# "SKIP name: why" and counts as skipped. The last line is "N passed, N failed", with
# ", N skipped" when something was skipped; exit status is non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
: "${TEST_BUILD:=build}"
: "${BIGMAC:=bin/bigmac}"
export BIGMAC TEST_BUILD
export OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export TEST_TMP=$(mktemp -d)
trap 'rm -rf "$TEST_TMP"' EXIT

passed=0
failed=0
skipped=0
failed_names=()
skip_lines=()

run_one() {
    local name=$1; shift
    local log="$TEST_TMP/$(basename "$name").log"
    local t0=$(date +%s.%N)
    # Sanitizer builds (make asan): leak detection on for everything except MPI tests (Open MPI
    # keeps allocations alive until exit); UBSan reports come with a stack.
    local leaks=1
    case $name in *mpi*) leaks=0 ;; esac
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=$leaks" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    timeout "${TEST_TIMEOUT:-300}" "$@" >"$log" 2>&1
    local rc=$?
    local t1=$(date +%s.%N)
    local p f k
    p=$(grep -c '^PASS ' "$log")
    f=$(grep -c '^FAIL ' "$log")
    k=$(grep -c '^SKIP ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "FAIL $name (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))" >>"$log"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    skipped=$((skipped + k))
    printf '%-40s %3d passed %3d failed  %6.2fs' "$name" "$p" "$f" "$(awk "BEGIN{print $t1 - $t0}")"
    if [ "$k" -ne 0 ]; then printf '  %d skipped' "$k"; fi
    printf '\n'
    while IFS= read -r line; do skip_lines+=("$name: $line"); done < <(grep '^SKIP ' "$log")
    if [ "$f" -ne 0 ]; then
        failed_names+=("$name")
        sed 's/^/    /' "$log" | grep -v '^    PASS ' | tail -n 60
    fi
}

# ONLY=<glob> (e.g. `make test ONLY='test_exec*'`) runs only the tests whose name matches.
only() { [ -z "${ONLY:-}" ] && return 0; case $1 in $ONLY) return 0 ;; esac; return 1; }
for t in "$TEST_BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    only "$(basename "$t")" || continue
    run_one "$(basename "$t")" "$t"
done
for s in tests/test_*.sh; do
    [ -f "$s" ] || continue
    only "$(basename "$s")" || continue
    run_one "$(basename "$s")" bash "$s"
done

if [ ${#failed_names[@]} -gt 0 ]; then echo "failed: ${failed_names[*]}"; fi
for line in "${skip_lines[@]}"; do echo "$line"; done
if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"; else
    echo "$passed passed, $failed failed"; fi
[ "$failed" -eq 0 ]

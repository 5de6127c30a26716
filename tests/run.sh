#!/usr/bin/env bash
# Runs every test binary (build/tests/test_*) and every shell test (tests/test_*.sh).
# Each prints "PASS name" / "FAIL name" lines; a binary that dies without reporting counts as
# one failure. A check that cannot run here (e.g. network namespaces without root) prints
# "SKIP name: why" and counts as skipped. The last line is "N passed, N failed", with
# ", N skipped" when something was skipped; exit status is non-zero on any failure.
#
# Two lanes: a test whose file says "# suite: waits" spends its time waiting, not computing (a
# rank's timeout, a stopped process, a launcher's grace period: test_faults_exec.sh runs ~5 s of
# CPU in ~55 s), so those tests run one after another in a second lane beside the others, and the
# suite takes about the longer lane's time instead of the sum. TEST_JOBS=1 runs one test at a
# time. Each test gets its own scratch directory (TEST_TMP), so the lanes share no files; each
# test's line is printed when it ends, the failures' output and the totals at the end, in order.
set -u
cd "$(dirname "$0")/.."
: "${TEST_BUILD:=build}"
: "${BIGMAC:=bin/bigmac}"
export BIGMAC TEST_BUILD
export OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
# two lanes may each run an MPI job: a rank that waits gives its core away instead of spinning
export OMPI_MCA_mpi_yield_when_idle=1
SUITE_TMP=$(mktemp -d)
trap 'rm -rf "$SUITE_TMP"' EXIT

# run_one NAME CMD...: runs one test with its own TEST_TMP; writes "passed failed skipped" and
# its log under $SUITE_TMP, prints its line
run_one() {
    local name=$1; shift
    local dir="$SUITE_TMP/$name" log="$SUITE_TMP/$name.log"
    mkdir -p "$dir"
    local t0=$(date +%s.%N)
    # Sanitizer builds (make asan): leak detection on for everything except MPI tests (Open MPI
    # keeps allocations alive until exit); UBSan reports come with a stack.
    local leaks=1
    case $name in *mpi*) leaks=0 ;; esac
    TEST_TMP=$dir ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=$leaks" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}" \
    timeout "${TEST_TIMEOUT:-300}" "$@" >"$log" 2>&1
    local rc=$?
    local t1=$(date +%s.%N)
    local p f k line
    p=$(grep -c '^PASS ' "$log")
    f=$(grep -c '^FAIL ' "$log")
    k=$(grep -c '^SKIP ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "FAIL $name (exit $rc$([ $rc -eq 124 ] && echo ', timed out'))" >>"$log"
    fi
    echo "$p $f $k" >"$SUITE_TMP/$name.result"
    line=$(printf '%-40s %3d passed %3d failed  %6.2fs' "$name" "$p" "$f" "$(awk "BEGIN{print $t1 - $t0}")")
    if [ "$k" -ne 0 ]; then line+=$(printf '  %d skipped' "$k"); fi
    echo "$line"   # one write: the two lanes' lines do not mix
    rm -rf "$dir"
}

# ONLY=<glob> (e.g. `make test ONLY='test_exec*'`) runs only the tests whose name matches.
only() { [ -z "${ONLY:-}" ] && return 0; case $1 in $ONLY) return 0 ;; esac; return 1; }
names=() main_lane=() wait_lane=()
for t in "$TEST_BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    only "$(basename "$t")" || continue
    names+=("$(basename "$t")"); main_lane+=("$t")
done
for s in tests/test_*.sh; do
    [ -f "$s" ] || continue
    only "$(basename "$s")" || continue
    names+=("$(basename "$s")")
    if grep -q '^# suite: waits' "$s"; then wait_lane+=("$s"); else main_lane+=("$s"); fi
done

run_lane() {
    local x
    for x in "$@"; do
        case $x in *.sh) run_one "$(basename "$x")" bash "$x" ;; *) run_one "$(basename "$x")" "$x" ;; esac
    done
}
if [ "${TEST_JOBS:-2}" -gt 1 ] && [ ${#wait_lane[@]} -gt 0 ]; then
    run_lane "${wait_lane[@]}" &
    lane=$!
    run_lane "${main_lane[@]}"
    wait "$lane"
else
    run_lane "${main_lane[@]}" ${wait_lane[@]+"${wait_lane[@]}"}
fi

passed=0 failed=0 skipped=0 failed_names=() skip_lines=()
for name in "${names[@]}"; do
    read -r p f k <"$SUITE_TMP/$name.result" || { p=0; f=1; k=0; }
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + k))
    if [ "$f" -ne 0 ]; then
        failed_names+=("$name")
        echo "$name:"
        sed 's/^/    /' "$SUITE_TMP/$name.log" | grep -v '^    PASS ' | tail -n 60
    fi
    while IFS= read -r line; do skip_lines+=("$name: $line"); done < <(grep '^SKIP ' "$SUITE_TMP/$name.log")
done

if [ ${#failed_names[@]} -gt 0 ]; then echo "failed: ${failed_names[*]}"; fi
for line in ${skip_lines[@]+"${skip_lines[@]}"}; do echo "$line"; done
if [ "$skipped" -gt 0 ]; then echo "$passed passed, $failed failed, $skipped skipped"; else
    echo "$passed passed, $failed failed"; fi
[ "$failed" -eq 0 ]

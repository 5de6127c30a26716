# lib.sh — helpers for shell tests: each check prints "PASS name" or "FAIL name".
# Source it; $BIGMAC is the binary under test, $TEST_TMP a scratch directory.
: "${BIGMAC:=bin/bigmac}"
: "${TEST_TMP:=$(mktemp -d)}"

# expect_exit NAME CODE CMD... : run CMD, check its exit status; output in $OUT_TXT.
expect_exit() {
    local name=$1 code=$2; shift 2
    OUT_TXT=$("$@" 2>&1)
    local rc=$?
    if [ "$rc" -eq "$code" ]; then echo "PASS $name"; else
        echo "FAIL $name: exit $rc, wanted $code"; echo "$OUT_TXT" | head -20 | sed 's/^/    /'; fi
}

# expect_contains NAME TEXT : the last expect_exit's output contains TEXT.
expect_contains() {
    local name=$1 text=$2
    if printf '%s' "$OUT_TXT" | grep -qF -- "$text"; then echo "PASS $name"; else
        echo "FAIL $name: output lacks: $text"; echo "$OUT_TXT" | head -20 | sed 's/^/    /'; fi
}

# losses_match NAME LOG_A LOG_B : two `train --log` files have the same number of steps and
# every loss agrees within 1e-4 relative.
losses_match() {
    local name=$1 a=$2 b=$3
    local r
    r=$(paste -d' ' <(sed 's/.*"loss": \([^,]*\),.*/\1/' "$a") <(sed 's/.*"loss": \([^,]*\),.*/\1/' "$b") |
        awk 'NF!=2{bad=1} {d=$1-$2; if(d<0)d=-d; a=$2<0?-$2:$2; if(d>1e-4*a)bad=1; n++} END{print (bad||n==0)?"bad":"ok", n}')
    if [ "${r%% *}" = ok ] && [ "$(wc -l <"$a")" = "$(wc -l <"$b")" ]; then echo "PASS $name"; else
        echo "FAIL $name: losses differ ($r)"; paste "$a" "$b" | head -5 | sed 's/^/    /'; fi
}

# params_match NAME A B : two --dump-params files have the same size, max |a-b| <= 1e-4 max |b|
# and relative L2 difference <= 1e-4.
params_match() {
    local name=$1 a=$2 b=$3
    if [ ! -s "$a" ] || [ "$(stat -c %s "$a")" != "$(stat -c %s "$b")" ]; then
        echo "FAIL $name: parameter files differ in size"; return; fi
    local r
    r=$(paste <(od -An -v -f -w4 "$a") <(od -An -v -f -w4 "$b") |
        awk '{d=$1-$2; if(d<0)d=-d; a=$2<0?-$2:$2; if(d>md)md=d; if(a>ma)ma=a; s+=d*d; n2+=$2*$2}
             END{rl=sqrt(s/(n2>0?n2:1)); printf "%s maxdiff=%g maxabs=%g rel_l2=%g\n", (md<=1e-4*ma && rl<=1e-4)?"ok":"bad", md, ma, rl}')
    if [ "${r%% *}" = ok ]; then echo "PASS $name"; else echo "FAIL $name: $r"; fi
}

# mpi_env : the environment every test that runs mpirun needs: one BLAS thread, root allowed,
# oversubscription (4 ranks on 2 cores), and no ASan leak report (MPI keeps allocations until
# exit by design; ASan builds check everything else).
mpi_env() {
    export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

# need_chromium NAME : set CHROME to the headless browser, or report NAME as skipped (a FAIL
# under CI, where `make deps` installed it) and end the test.
need_chromium() {
    CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
    [ -n "$CHROME" ] && return 0
    if [ -n "${CI:-}" ]; then echo "FAIL $1: chromium not installed (make deps installs it)"
    else echo "SKIP $1: chromium not installed (make deps installs it)"; fi
    exit 0
}

# chrome ARGS... : headless Chromium with a fresh profile in TEST_TMP and no network of its own,
# 90 s at most.
chrome() {
    local prof
    prof=$(mktemp -d "$TEST_TMP/prof.XXXXXX")
    timeout 90 "$CHROME" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --disable-dev-shm-usage --user-data-dir="$prof" "$@" 2>/dev/null
}


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

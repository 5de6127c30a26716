#!/usr/bin/env bash
# test_make_fresh.sh — the README's first commands on a machine without the build packages.
# make runs with a PATH that holds no compiler, no MPI and no other tool (only make itself, by
# its full path), as on a bare Debian 12 before `make deps`: reading the Makefile must not look
# for mpicc (it used to stop with "mpicc not found" before deps could run), `deps` must plan the
# apt-get install and come before every build step (also under -j), and a build without the
# packages must say which package to install. Nothing here installs anything: deps and the
# builds run with -n, and the one real run (preflight) only looks.
cd "$(dirname "$0")/.."
. tests/lib.sh
unset MAKEFLAGS MFLAGS MAKELEVEL
MAKE_BIN=$(command -v make)
fresh="BUILD=$TEST_TMP/fresh-build BIN=$TEST_TMP/fresh-bin"

# deps first, before anything looks for a tool: the apt-get install line precedes the first
# compile line (the build's own checks, preflight, come after deps)
deps_first() {
    local name=$1 out=$2
    local apt cc
    apt=$(printf '%s\n' "$out" | grep -n 'apt-get install' | head -1 | cut -d: -f1)
    cc=$(printf '%s\n' "$out" | grep -n 'command -v mpicc\|  CC  ' | head -1 | cut -d: -f1)
    if [ -n "$apt" ] && [ -n "$cc" ] && [ "$apt" -lt "$cc" ]; then echo "PASS $name"; else
        echo "FAIL $name: apt-get install at line '${apt:-none}', first build check at line '${cc:-none}'"; fi
}

for goal in run test; do
    # shellcheck disable=SC2086
    expect_exit make_fresh_deps_${goal}_plans 0 env PATH=/nonexistent "$MAKE_BIN" -n $fresh deps $goal
    expect_contains make_fresh_deps_${goal}_apt_get "apt-get install -y"
    expect_contains make_fresh_deps_${goal}_packages "libopenmpi-dev openmpi-bin libopenblas-dev libjansson-dev"
    case $OUT_TXT in *"mpicc not found"*) echo "FAIL make_fresh_deps_${goal}_no_mpicc_error";;
        *) echo "PASS make_fresh_deps_${goal}_no_mpicc_error";; esac
    deps_first make_fresh_deps_${goal}_deps_before_build "$OUT_TXT"
    # shellcheck disable=SC2086
    expect_exit make_fresh_deps_${goal}_parallel 0 env PATH=/nonexistent "$MAKE_BIN" -n -j2 $fresh deps $goal
    deps_first make_fresh_deps_${goal}_parallel_deps_before_build "$OUT_TXT"
done
# every package .ci/run used to install by hand is in the list deps installs
expect_exit make_fresh_deps_list 0 env PATH=/nonexistent "$MAKE_BIN" -n $fresh deps
for p in build-essential gawk chromium clang libclang-rt-14-dev python3-torch; do
    expect_contains make_fresh_deps_has_$p " $p"
done

# a build without the packages stops at once and names what to install
# shellcheck disable=SC2086
expect_exit make_fresh_build_names_packages 2 env PATH=/nonexistent "$MAKE_BIN" --no-print-directory $fresh all
expect_contains make_fresh_build_names_mpi "libopenmpi-dev (for mpicc)"
expect_contains make_fresh_build_names_compiler "build-essential (for cc)"
expect_contains make_fresh_build_hint "make deps"
if [ -e "$TEST_TMP/fresh-build" ]; then echo "FAIL make_fresh_build_wrote_nothing"; else
    echo "PASS make_fresh_build_wrote_nothing"; fi

# with the packages present (this machine after deps), the same goals do not plan an install
if command -v mpicc >/dev/null && command -v cc >/dev/null; then
    expect_exit make_fresh_deps_noop 0 "$MAKE_BIN" -n deps
    case $OUT_TXT in *"apt-get install -y \$missing"*) echo "PASS make_fresh_deps_noop_guarded";;
        *) echo "FAIL make_fresh_deps_noop_guarded: the install is not behind the missing-package check";; esac
fi

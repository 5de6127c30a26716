#!/usr/bin/env bash
# test_install.sh — bigmac installs like a C library: `make install PREFIX=... DESTDIR=...` puts
# the CLI, the public headers, libbigmac.a, libbigmac.so (with its soname) and bigmac.pc in
# place; programs build against the installed tree through pkg-config alone (the repository's
# examples/custom_encoder.c and a ten-line plan+verify program) and run; `make uninstall`
# removes every file again. Uses the objects this test run built (TEST_BUILD/TEST_BIN).
cd "$(dirname "$0")/.."
. tests/lib.sh
unset MAKEFLAGS MFLAGS MAKELEVEL
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
: "${TEST_BUILD:=build}" "${TEST_BIN:=bin}"
# a sanitizer build's library needs the sanitizer runtime in the programs linked against it
SAN=${TEST_SAN:-}
if ! command -v pkg-config >/dev/null; then echo "FAIL install_pkg_config_missing: apt-get install pkg-config (make deps)"; exit 0; fi
mk() { make --no-print-directory -s BUILD="$TEST_BUILD" BIN="$TEST_BIN" SAN="$SAN" "$@"; }

prefix=$TEST_TMP/prefix
expect_exit install_runs 0 mk install PREFIX="$prefix"
expect_contains install_says_where "installed bigmac"
version=$("$BIGMAC" --version | head -1 | cut -d' ' -f2)
sov=$(sed -n 's/^#define BM_SOVERSION \([0-9]*\)/\1/p' include/bigmac.h)
for f in bin/bigmac include/bigmac.h include/bigmac_module.h include/bigmac_report.h lib/libbigmac.a lib/libbigmac.so \
         "lib/libbigmac.so.$sov" "lib/libbigmac.so.$version" lib/pkgconfig/bigmac.pc; do
    if [ -e "$prefix/$f" ]; then echo "PASS install_has_${f//\//_}"; else echo "FAIL install_has_${f//\//_}: $prefix/$f missing"; fi
done
soname=$(readelf -d "$prefix/lib/libbigmac.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ -n "$sov" ] && [ "$soname" = "libbigmac.so.$sov" ]; then echo "PASS install_soname"; else echo "FAIL install_soname: '$soname'"; fi

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
expect_exit install_pkg_config_libs 0 pkg-config --cflags --libs bigmac
expect_contains install_pkg_config_libs_names_lib "-L$prefix/lib -lbigmac"
expect_contains install_pkg_config_cflags "-I$prefix/include"
expect_exit install_pkg_config_modversion 0 pkg-config --modversion bigmac
if [ "$OUT_TXT" = "$version" ] && [ -n "$version" ]; then echo "PASS install_pkg_config_version_matches"; else
    echo "FAIL install_pkg_config_version_matches: pc '$OUT_TXT', bigmac --version '$version'"; fi
expect_exit install_pkg_config_static 0 pkg-config --static --libs bigmac
expect_contains install_pkg_config_static_deps "-ljansson"

# the installed CLI runs on its own
expect_exit install_cli_version 0 "$prefix/bin/bigmac" --version
expect_contains install_cli_version_formats 'table format: "bigmac-table" version 1'
expect_exit install_cli_plan 0 "$prefix/bin/bigmac" plan examples/tiny-mllm.json -o "$TEST_TMP/inst_table.json"
expect_exit install_cli_verify 0 "$prefix/bin/bigmac" verify "$TEST_TMP/inst_table.json"

# a ten-line program: plan and verify a spec through the installed library
cat >"$TEST_TMP/planverify.c" <<'C'
#include <bigmac.h>
int main(int argc, char **argv) {
    struct bm_err err; struct bm_spec *s; struct bm_table *t; struct bm_plan_opts o;
    if (argc != 2) return 2;
    if (bm_spec_load(argv[1], &s, &err)) return puts(err.msg), 1;
    bm_plan_opts_from_spec(&o, s);
    if (bm_plan_build(s, &o, &t, NULL, &err) || bm_verify(t, &err)) return puts(err.msg), 1;
    printf("bigmac %s: planned and verified %s on %d ranks\n", bm_version(), argv[1], t->pp);
    bm_table_free(t), bm_spec_free(s); return 0; }
C
# shellcheck disable=SC2046
expect_exit install_build_planverify_shared 0 cc $SAN $(pkg-config --cflags bigmac) -o "$TEST_TMP/planverify" \
    "$TEST_TMP/planverify.c" $(pkg-config --libs bigmac)
expect_exit install_planverify_runs 0 env LD_LIBRARY_PATH="$prefix/lib" "$TEST_TMP/planverify" examples/tiny-mllm.json
expect_contains install_planverify_output "bigmac $version: planned and verified examples/tiny-mllm.json on 4 ranks"
expect_exit install_planverify_uses_installed_so 0 env LD_LIBRARY_PATH="$prefix/lib" ldd "$TEST_TMP/planverify"
expect_contains install_planverify_links_soname "libbigmac.so.$sov => $prefix/lib/libbigmac.so.$sov"
expect_exit install_planverify_bad_spec 1 env LD_LIBRARY_PATH="$prefix/lib" "$TEST_TMP/planverify" examples/nope.json
expect_contains install_planverify_bad_spec_message "examples/nope.json"
# shellcheck disable=SC2046
expect_exit install_build_planverify_static 0 cc $SAN $(pkg-config --cflags bigmac) -o "$TEST_TMP/planverify_static" \
    "$TEST_TMP/planverify.c" "$prefix/lib/libbigmac.a" $(pkg-config --static --libs-only-l bigmac | sed 's/-lbigmac//')
expect_exit install_planverify_static_runs 0 "$TEST_TMP/planverify_static" examples/tiny-mllm.json

# the public report header: simulate and draw a planned table through the installed library
cat >"$TEST_TMP/draw.c" <<'C'
#include <bigmac.h>
#include <bigmac_cost.h>
#include <bigmac_report.h>
int main(int argc, char **argv) {
    struct bm_err err; struct bm_table *t; struct bm_costs *c; struct bm_timeline *tl;
    if (argc != 2 || bm_table_load(argv[1], &t, &c, &err)) return 1;
    if (bm_simulate(t, c, &(struct bm_sim_opts){0}, &tl, &err)) return puts(err.msg), 1;
    int rc = bm_render_ascii(t, tl, 60, stdout);
    bm_timeline_free(tl), bm_table_free(t), bm_costs_free(c); return rc; }
C
# shellcheck disable=SC2046
expect_exit install_build_report_program 0 cc $SAN $(pkg-config --cflags bigmac) -o "$TEST_TMP/draw" \
    "$TEST_TMP/draw.c" $(pkg-config --libs bigmac)
expect_exit install_report_program_runs 0 env LD_LIBRARY_PATH="$prefix/lib" "$TEST_TMP/draw" "$TEST_TMP/inst_table.json"
"$BIGMAC" render "$TEST_TMP/inst_table.json" --format ascii --width 60 -o "$TEST_TMP/draw_cli.txt" >/dev/null 2>&1
if [ "$OUT_TXT" = "$(cat "$TEST_TMP/draw_cli.txt")" ]; then echo "PASS install_report_program_draws_as_cli"; else
    echo "FAIL install_report_program_draws_as_cli"; diff <(echo "$OUT_TXT") "$TEST_TMP/draw_cli.txt" | head -5; fi

# the repository's custom-module example, built from the installed tree only; trains
# single-process and pipelined on 2 MPI ranks (bm_train_main is in the installed library)
# shellcheck disable=SC2046
expect_exit install_build_custom_encoder 0 cc $SAN $(pkg-config --cflags bigmac) -o "$TEST_TMP/custom_encoder" \
    examples/custom_encoder.c $(pkg-config --libs bigmac) -lm
expect_exit install_custom_encoder_reference 0 env LD_LIBRARY_PATH="$prefix/lib" "$TEST_TMP/custom_encoder" \
    examples/custom-encoder.json --reference --steps 2 --quiet
if command -v mpirun >/dev/null; then
    expect_exit install_custom_encoder_mpi 0 env LD_LIBRARY_PATH="$prefix/lib" timeout 60 mpirun --oversubscribe \
        -x LD_LIBRARY_PATH -np 2 "$TEST_TMP/custom_encoder" examples/custom-encoder.json --steps 2
    expect_contains install_custom_encoder_mpi_trained "step    2/2"
fi

# DESTDIR stages the same tree under a root; bigmac.pc still names PREFIX
expect_exit install_destdir 0 mk install PREFIX=/usr/local DESTDIR="$TEST_TMP/stage"
if [ -f "$TEST_TMP/stage/usr/local/lib/pkgconfig/bigmac.pc" ] &&
   grep -q '^prefix=/usr/local$' "$TEST_TMP/stage/usr/local/lib/pkgconfig/bigmac.pc"; then
    echo "PASS install_destdir_pc_prefix"; else echo "FAIL install_destdir_pc_prefix"; fi

# uninstall removes every installed file (and nothing it did not install)
touch "$prefix/lib/not-ours"
expect_exit install_uninstall 0 mk uninstall PREFIX="$prefix"
left=$(cd "$prefix" && find . -type f -o -type l | sort | tr '\n' ' ')
if [ "$left" = "./lib/not-ours " ]; then echo "PASS install_uninstall_removes_all"; else
    echo "FAIL install_uninstall_removes_all: left: $left"; fi

#!/usr/bin/env bash
# test_pip.sh — `pip install ./python` (python/pyproject.toml, python/_build/bigmac_build.py) in
# fresh venvs, from outside the repository's python/ (PYTHONPATH unset): without system site
# packages and with build isolation (nothing to download: the backend needs the standard library
# alone), and with --system-site-packages and --no-build-isolation (Debian's torch visible). Each
# runs the README's Python lines; bigmac.__version__ equals the C library's; the sdist builds and
# installs on its own.
. "$(dirname "$0")/lib.sh"
T=$TEST_TMP
PY=/usr/bin/python3
unset PYTHONPATH BIGMAC_LIB
export OMP_NUM_THREADS=1 PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# the two installs from ./python share one build of the C library (the sdist builds its own)
export BIGMAC_NATIVE_BUILD=$T/native-build

# pip's build calls the Makefile without SAN (python/_build/bigmac_build.py): under make asan it
# would build and test the same plain library as make test's run, for a minute or two of the
# suite's budget, so it says so and stops there
if [ -n "${TEST_SAN:-}" ]; then
    echo "SKIP pip_install: under make asan pip builds the plain library, which make test's run installs and tests"
    exit 0
fi
if ! $PY -m venv --help >/dev/null 2>&1 || ! $PY -m pip --version >/dev/null 2>&1; then
    if [ -n "${CI:-}" ]; then echo "FAIL pip_available: python3-venv/python3-pip missing (make deps installs them)"
    else echo "SKIP pip_available: python3-venv or python3-pip missing (make deps installs them)"; fi
    exit 0
fi
version=$("$BIGMAC" --version | head -1 | cut -d' ' -f2)
readme_line=$(grep -m1 '^/usr/bin/python3 -c "import bigmac;' README.md | sed 's|^/usr/bin/python3 ||')

# plain venv, build isolation (pip's default), no index
expect_exit pip_venv_plain_created 0 $PY -m venv "$T/v1"
expect_exit pip_install_plain 0 timeout 300 "$T/v1/bin/pip" install ./python
expect_contains pip_install_plain_says "Successfully installed bigmac-$version"
expect_exit pip_plain_imports_installed 0 "$T/v1/bin/python" -c "import bigmac, sys; assert bigmac.__file__.startswith('$T/v1/'), bigmac.__file__; print(bigmac.__version__)"
if [ "$OUT_TXT" = "$version" ]; then echo "PASS pip_version_is_the_libraries"; else
    echo "FAIL pip_version_is_the_libraries: bigmac.__version__ '$OUT_TXT', bigmac --version '$version'"; fi
expect_exit pip_plain_readme_line 0 sh -c "\"$T/v1/bin/python\" $readme_line"
expect_exit pip_plain_plan_verify_simulate_render 0 "$T/v1/bin/python" - <<'PYEOF'
import bigmac, json, os, tempfile
t = bigmac.plan("examples/tiny-mllm.json", pp=2, policy="optimus")
bigmac.verify(t)
r = bigmac.simulate(t)
assert r["makespan_ms"] > 0, r
d = tempfile.mkdtemp()
for fmt in ("svg", "html", "ascii", "trace", "csv"):
    p = os.path.join(d, "x." + fmt)
    bigmac.render(t, fmt, p)
    assert os.path.getsize(p) > 100, (fmt, os.path.getsize(p))
print("ok", r["makespan_ms"])
PYEOF
expect_exit pip_plain_has_no_torch_but_imports 0 "$T/v1/bin/python" -c "
import importlib.util, bigmac
assert importlib.util.find_spec('torch') is None"

# venv with Debian's site packages (torch), no build isolation: the command the tests may use
expect_exit pip_venv_system_created 0 $PY -m venv --system-site-packages "$T/v2"
expect_exit pip_install_system 0 timeout 300 "$T/v2/bin/pip" install --no-build-isolation ./python
expect_exit pip_system_readme_line 0 sh -c "\"$T/v2/bin/python\" $readme_line"
expect_exit pip_system_torch_train 0 timeout 300 "$T/v2/bin/python" -m bigmac.torch train examples/tiny-mllm.json \
    --nproc 2 --pp 2 --vpp 1 --backbone 1f1b --steps 2 --log "$T/torch.jsonl"
if [ "$(wc -l <"$T/torch.jsonl" 2>/dev/null)" = 2 ]; then echo "PASS pip_system_torch_train_logs_steps"; else
    echo "FAIL pip_system_torch_train_logs_steps"; fi
expect_exit pip_system_uninstall 0 "$T/v2/bin/pip" uninstall -y bigmac

# the sdist carries the C sources (native/) and installs on its own
expect_exit pip_sdist_builds 0 $PY -c "
import sys; sys.path.insert(0, 'python/_build'); import bigmac_build
print(bigmac_build.build_sdist('$T/sdist'))"
sdist="$T/sdist/$OUT_TXT"
expect_exit pip_sdist_lists_native_sources 0 sh -c "tar tzf '$sdist' | grep -q '/native/src/plan/plan.c' && tar tzf '$sdist' | grep -q '/native/Makefile'"
expect_exit pip_sdist_installs 0 timeout 300 env -u BIGMAC_NATIVE_BUILD "$T/v1/bin/pip" install --force-reinstall "$sdist"
expect_exit pip_sdist_runs 0 sh -c "cd '$T' && '$T/v1/bin/python' -c \"import bigmac; print(bigmac.__version__)\""

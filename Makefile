# bigmac — build, test, sanitize, run.
#   make            library + bin/bigmac
#   make test       every test; last line "N passed, N failed"; non-zero exit on failure
#                   (ONLY='test_exec*' runs the tests whose name matches the glob)
#   make asan       the whole suite under AddressSanitizer + UBSan (separate build dir)
#   make run        the embedded demo
#   make bench      benchmarks (print figures; never asserted as wall-clock limits)
#   make deps       install the Debian packages (no-op when present)
#   make fuzz       libFuzzer targets (fuzz/) under ASan+UBSan, FUZZ_SECONDS (60) each
#   make docs       docs/spec.md's key tables rewritten from the knob list (src/spec/knobs.c)

CC      ?= cc
BUILD   ?= build
BIN     ?= bin
OPT     ?= -O2
SAN     ?=
WERROR  ?= -Werror
# -fPIC: the same objects go into libbigmac.a and libbigmac.so.
# -fvisibility=hidden: the shared library exports only what the public headers declare (BM_API).
CFLAGS  := -std=c11 -Wall -Wextra -Wpedantic -Wno-format-truncation $(WERROR) -g $(OPT) $(SAN) -fPIC -fvisibility=hidden \
           -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc -I$(BUILD)/gen $(EXTRA_CFLAGS)
LDFLAGS := $(SAN) $(EXTRA_LDFLAGS)
LDLIBS  := -ljansson -lopenblas -lm

PREFIX  ?= /usr/local
DESTDIR ?=
# One version, in include/bigmac.h; the soname carries its major number.
VERSION   := $(shell sed -n 's/^\#define BM_VERSION "\(.*\)"/\1/p' include/bigmac.h 2>/dev/null)
SOVERSION := $(shell sed -n 's/^\#define BM_SOVERSION \([0-9]*\)/\1/p' include/bigmac.h 2>/dev/null)

# Every Debian package that the build, the demo (make run) and the tests need. `make deps`
# installs the missing ones; nothing below looks for a tool while the Makefile is read, so
# `make deps run` works on a machine that has only git and make.
DEPS_PKGS := build-essential gawk pkg-config procps iproute2 \
             libopenmpi-dev openmpi-bin libopenblas-dev libjansson-dev \
             python3-dev python3-numpy python3-torch python3-sklearn python3-venv python3-pip \
             chromium nodejs clang libclang-rt-14-dev abigail-tools

# Looked up when a recipe runs (recursive '='), i.e. after `deps` in `make deps run`.
MPICC = $(shell command -v mpicc 2>/dev/null)

# The library is every src/*/*.c except the CLI's commands: the core, the one MPI file (the
# executor's transport) and the train entry point (bm_train_main, src/cli/train_main.c, with the
# plan-flag parser it shares with the CLI), so that programs registering their own modules
# (examples/*.c) link the library alone. A program that never calls bm_train (src/exec/train.c)
# or bm_train_main pulls no MPI object out of libbigmac.a and links with plain cc (the tests do,
# but test_train_api).
MPI_SRC  := src/exec/comm_mpi.c
TRAIN_SRC := src/cli/train_main.c src/cli/flags.c
LIB_SRC  := $(filter-out src/cli/%,$(sort $(wildcard src/*/*.c))) $(TRAIN_SRC)
CLI_SRC  := $(filter-out $(TRAIN_SRC),$(sort $(wildcard src/cli/*.c)))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))

EXAMPLE_SRC := $(sort $(wildcard examples/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libbigmac.a
SHLIB    := $(BUILD)/libbigmac.so.$(VERSION)
SONAME   := libbigmac.so.$(SOVERSION)
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCHES  := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
EXAMPLES := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
FUZZERS  := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/%)
# The Python package's native half (python/bigmac, docs/python.md): the library's objects
# without MPI, bm_train and bm_train_main, and the flat C interface python/bigmac/_capi.c (on the
# public API only: bm_timeline_write_json is the simulate --json the Python API matches), as one shared object that
# python/bigmac/__init__.py loads with ctypes. PYTHONPATH=python finds it from the repository.
PYTHON   ?= /usr/bin/python3
PYLIB    := $(BUILD)/python/_bigmac.so
PYLIB_OBJ := $(filter-out $(BUILD)/$(MPI_SRC:.c=.o) $(BUILD)/src/cli/train_main.o $(BUILD)/src/exec/train.o,$(LIB_OBJ))

# Programs that may call bm_train_main link through mpicc (MPI's libraries and flags).
LINK = OMPI_CC=$(CC) $(MPICC)

.PHONY: all test asan run bench deps clean preflight fuzz fuzz-build fuzzers shared install uninstall abi-baseline docs
all: $(BIN)/bigmac $(EXAMPLES) shared $(PYLIB)
shared: $(BUILD)/libbigmac.so

# Every tool and header the build needs, with the Debian package that has it. Checked when a
# build starts (never while the Makefile is read), so the message names what to install.
preflight:
	@missing=""; \
	command -v $(firstword $(CC)) >/dev/null 2>&1 || missing="$$missing build-essential (for $(firstword $(CC)))"; \
	command -v ar >/dev/null 2>&1 || missing="$$missing binutils (for ar)"; \
	command -v mpicc >/dev/null 2>&1 || missing="$$missing libopenmpi-dev (for mpicc)"; \
	if command -v $(firstword $(CC)) >/dev/null 2>&1; then \
	  echo '#include <jansson.h>' | $(CC) -E -x c - >/dev/null 2>&1 || missing="$$missing libjansson-dev (for jansson.h)"; \
	  echo '#include <cblas.h>' | $(CC) -E -x c - >/dev/null 2>&1 || missing="$$missing libopenblas-dev (for cblas.h)"; \
	fi; \
	if [ -n "$$missing" ]; then \
	  echo "bigmac: cannot build, missing:$$missing"; \
	  echo "bigmac: hint: \`make deps\` installs every package the build and the tests need"; \
	  echo "bigmac: hint: or: apt-get install $(DEPS_PKGS)"; \
	  exit 1; \
	fi
# `make deps run`, `make deps test`: the build starts only after deps has finished, also under -j.
ifneq ($(filter deps,$(MAKECMDGOALS)),)
preflight: | deps
endif

$(BUILD)/%.o: %.c $(wildcard include/*.h) $(wildcard src/*/*.h) | preflight
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c $< -o $@

# The HTML report's script and style are files (src/report/assets/, checked by node --check in
# the tests); each becomes a list of C string literals, one per line, that html.c and
# html_views.c #include. Backslashes, quotes and '?' (trigraphs) are escaped.
ASSETS    := $(sort $(wildcard src/report/assets/*.js src/report/assets/*.css))
ASSET_INC := $(ASSETS:src/report/assets/%=$(BUILD)/gen/assets/%.inc)
$(BUILD)/gen/assets/%.inc: src/report/assets/% | preflight
	@mkdir -p $(dir $@)
	@echo "  ASSET   $<"
	@awk '{ gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); gsub(/\?/, "\\?"); printf "    \"%s\\n\",\n", $$0 }' $< > $@.tmp && mv $@.tmp $@
$(BUILD)/src/report/html.o $(BUILD)/src/report/html_views.o: $(ASSET_INC)

$(BUILD)/src/exec/comm_mpi.o: src/exec/comm_mpi.c $(wildcard include/*.h) $(wildcard src/*/*.h) | preflight
	@mkdir -p $(dir $@)
	@echo "  MPICC   $<"
	@$(LINK) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

# The shared library records its own dependencies (MPI through mpicc, jansson, OpenBLAS). Its
# exports are the functions the public headers declare: -fvisibility=hidden with BM_API, and a
# version script of exactly those names, generated from the headers, for what visibility misses
# (GCC 12 exports the ifunc resolvers of src/nn's target_clones functions regardless).
$(BUILD)/bigmac.map: $(wildcard include/*.h) | preflight
	@mkdir -p $(dir $@)
	@{ echo "{ global:"; cat include/*.h | tr '\n' ' ' | sed 's|/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/| |g' | tr ';' '\n' | \
	  grep -o '\bbm_[a-z0-9_]*\s*(' | sed 's/\s*(//' | sort -u | sed 's/.*/  &;/'; echo "local: *; };"; } > $@.tmp && mv $@.tmp $@

$(SHLIB): $(LIB_OBJ) $(BUILD)/bigmac.map
	@echo "  SHLIB   $@"
	@$(LINK) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=$(BUILD)/bigmac.map $(LDFLAGS) -o $@ $(LIB_OBJ) $(LDLIBS)

$(BUILD)/libbigmac.so: $(SHLIB)
	@ln -sf $(notdir $(SHLIB)) $(BUILD)/$(SONAME)
	@ln -sf $(SONAME) $@

$(BIN)/bigmac: $(CLI_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(LINK) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/examples/%: examples/%.c $(LIB)
	@mkdir -p $(dir $@)
	@echo "  EXAMPLE $<"
	@$(LINK) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/test.h $(LIB)
	@mkdir -p $(dir $@)
	@echo "  TEST    $<"
	@$(CC) $(CFLAGS) -Itests -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

# A test that calls bm_train pulls the MPI transport out of libbigmac.a: linked through mpicc.
$(BUILD)/tests/test_train_api: tests/test_train_api.c tests/test.h $(LIB)
	@mkdir -p $(dir $@)
	@echo "  TEST    $<"
	@$(LINK) $(CFLAGS) -Itests -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

# _capi.c sees the public headers only (no -Isrc): the binding is a user of the public API
# (tests/test_python_capi.sh also checks that it calls nothing the shared library does not export).
PY_CFLAGS := $(filter-out -Isrc -I$(BUILD)/gen,$(CFLAGS))
$(PYLIB): python/bigmac/_capi.c $(PYLIB_OBJ)
	@mkdir -p $(dir $@)
	@echo "  PYLIB   $@"
	@$(CC) $(PY_CFLAGS) -fvisibility=default -shared -Wl,--no-undefined -o $@ python/bigmac/_capi.c $(PYLIB_OBJ) $(LDFLAGS) $(LDLIBS)

# docs/spec.md's device and cost key tables are written from the knob list (src/spec/knobs.c);
# tests/test_knobs.c fails when the committed file differs from what this writes.
$(BUILD)/scripts/knob_docs: scripts/knob_docs.c $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)
docs: $(BUILD)/scripts/knob_docs
	@$(BUILD)/scripts/knob_docs docs/spec.md

# The recorded public ABI (tests/test_abi.sh compares the build against it): rerun after a change
# that bumps BM_SOVERSION (a public struct's layout, a removed function), and commit abi/.
abi-baseline: $(BUILD)/libbigmac.so
	@mkdir -p abi
	@abidw --headers-dir include --no-corpus-path --out-file abi/libbigmac.abi $(BUILD)/libbigmac.so
	@echo "abi/libbigmac.abi: the public ABI of $(SONAME)"

test: all $(TESTS)
	@BIGMAC=$(BIN)/bigmac TEST_BUILD=$(BUILD) TEST_BIN=$(BIN) TEST_SAN="$(SAN)" bash tests/run.sh

# ASan/UBSan build of everything in its own directories; leak detection on except for MPI
# tests (tests/run.sh sets detect_leaks=0 for those).
# The fuzz targets are sanitized builds already: the asan pass skips test_fuzz_short.sh.
asan:
	@$(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/bin OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" test

# libFuzzer targets (docs/hardening.md): the library is rebuilt with clang in build-fuzz/ with
# coverage instrumentation (fuzzer-no-link) plus ASan/UBSan; each fuzz/fuzz_<t>.c links with
# libFuzzer and runs FUZZ_SECONDS on tests/corpus/<t>/ (read-only seeds) and build-fuzz/corpus/<t>/
# (where it keeps what it finds), with fuzz/<t>.dict (else fuzz/json.dict; plan takes raw bytes).
# Crashing inputs land in build-fuzz/artifacts/.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_BUILD   := build-fuzz
FUZZ_SAN     := -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
                -fno-sanitize-recover=undefined
FUZZ_FLAGS   ?= -timeout=10 -rss_limit_mb=2048 -print_final_stats=1

$(BUILD)/fuzz/%: fuzz/%.c $(LIB)
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $<"
	@$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) -fsanitize=fuzzer $(LDLIBS)

fuzzers: $(FUZZERS)

fuzz-build:
	@$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=$(FUZZ_BUILD) BIN=$(FUZZ_BUILD)/bin OPT="-O1 -gline-tables-only" \
	  SAN="$(FUZZ_SAN)" EXTRA_CFLAGS="-Wno-unknown-warning-option $(EXTRA_CFLAGS)" fuzzers

fuzz: fuzz-build
	@for f in $(FUZZ_SRC:fuzz/fuzz_%.c=%); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$f $(FUZZ_BUILD)/artifacts; \
	  echo "== fuzz_$$f for $(FUZZ_SECONDS)s"; \
	  dict=fuzz/$$f.dict; [ -f $$dict ] || dict=fuzz/json.dict; [ $$f = plan ] && dict=; \
	  $(FUZZ_BUILD)/fuzz/fuzz_$$f $(FUZZ_FLAGS) -max_total_time=$(FUZZ_SECONDS) \
	    $${dict:+-dict=$$dict} -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$f- \
	    $(FUZZ_BUILD)/corpus/$$f tests/corpus/$$f || exit 1; \
	done

# The embedded demo (scripts/run-demo.sh says what it runs).
run: all
	@BIGMAC=$(BIN)/bigmac bash scripts/run-demo.sh

bench: all $(BENCHES)
	@for b in $(BENCHES); do echo "== $$b"; $$b || exit 1; done
	@for s in bench/bench_*.sh; do [ -f "$$s" ] || continue; echo "== $$s"; BIGMAC=$(BIN)/bigmac bash $$s || exit 1; done

# Root installs directly; anyone else through sudo. Nothing to install: no apt-get at all.
deps:
	@missing=""; for p in $(DEPS_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "deps: all present"; exit 0; fi; \
	sudo=""; \
	if [ "$$(id -u)" != 0 ]; then \
	  command -v sudo >/dev/null 2>&1 || { echo "deps: missing:$$missing"; \
	    echo "deps: not root and no sudo: run \`make deps\` as root, or apt-get install$$missing"; exit 1; }; \
	  sudo=sudo; \
	fi; \
	echo "deps: installing:$$missing"; \
	$$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing

# make install PREFIX=/usr/local DESTDIR=: the CLI, the public headers, the static and shared
# library (soname libbigmac.so.$(SOVERSION)) and bigmac.pc for pkg-config.
# The Python package goes to PYDIR under the prefix (python3.X/dist-packages: on the sys.path of
# Debian's python3 for /usr/local); PYTHONPATH=$(PREFIX)/$(PYDIR) for other prefixes.
PYDIR ?= $(shell $(PYTHON) -c "import sys; print('lib/python%d.%d/dist-packages' % sys.version_info[:2])" 2>/dev/null || echo lib/python3/dist-packages)
INSTALL_FILES := bin/bigmac include/bigmac.h include/bigmac_cost.h include/bigmac_module.h include/bigmac_report.h lib/libbigmac.a \
                 lib/$(notdir $(SHLIB)) lib/$(SONAME) lib/libbigmac.so lib/pkgconfig/bigmac.pc
install: all
	@d="$(DESTDIR)$(PREFIX)"; \
	install -d "$$d/bin" "$$d/include" "$$d/lib/pkgconfig" && \
	install -m 755 $(BIN)/bigmac "$$d/bin/bigmac" && \
	install -m 644 include/bigmac.h include/bigmac_cost.h include/bigmac_module.h include/bigmac_report.h "$$d/include/" && \
	install -m 644 $(LIB) "$$d/lib/libbigmac.a" && \
	install -m 755 $(SHLIB) "$$d/lib/" && \
	ln -sf $(notdir $(SHLIB)) "$$d/lib/$(SONAME)" && \
	ln -sf $(SONAME) "$$d/lib/libbigmac.so" && \
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' bigmac.pc.in >"$$d/lib/pkgconfig/bigmac.pc" && \
	install -d "$$d/$(PYDIR)/bigmac/torch" && \
	install -m 644 python/bigmac/*.py "$$d/$(PYDIR)/bigmac/" && \
	install -m 644 python/bigmac/torch/*.py "$$d/$(PYDIR)/bigmac/torch/" && \
	install -m 755 $(PYLIB) "$$d/$(PYDIR)/bigmac/_bigmac.so" && \
	echo "installed bigmac $(VERSION) in $$d" && \
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig "$$d/lib"; fi

uninstall:
	@d="$(DESTDIR)$(PREFIX)"; for f in $(INSTALL_FILES); do rm -f "$$d/$$f"; done; \
	rm -rf "$$d/$(PYDIR)/bigmac"; \
	echo "removed bigmac from $$d"

clean:
	rm -rf build build-asan build-fuzz bin out

# bigmac — build, test, sanitize, run.
#   make            library + bin/bigmac
#   make test       every test; last line "N passed, N failed"; non-zero exit on failure
#   make asan       the whole suite under AddressSanitizer + UBSan (separate build dir)
#   make run        the embedded demo
#   make bench      benchmarks (print figures; never asserted as wall-clock limits)
#   make deps       install the Debian packages (no-op when present)
#   make fuzz       libFuzzer targets (fuzz/) under ASan+UBSan, FUZZ_SECONDS (60) each

CC      ?= cc
BUILD   ?= build
BIN     ?= bin
OPT     ?= -O2
SAN     ?=
WERROR  ?= -Werror
CFLAGS  := -std=c11 -Wall -Wextra -Wpedantic -Wno-format-truncation $(WERROR) -g $(OPT) $(SAN) -fPIC \
           -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc $(EXTRA_CFLAGS)
LDFLAGS := $(SAN) $(EXTRA_LDFLAGS)
LDLIBS  := -ljansson -lopenblas -lm

DEPS_PKGS := libopenmpi-dev openmpi-bin libopenblas-dev libjansson-dev

MPICC   := $(shell command -v mpicc 2>/dev/null)
HAS_BLAS := $(shell test -f /usr/include/x86_64-linux-gnu/cblas.h -o -f /usr/include/cblas.h -o -f /usr/include/openblas/cblas.h && echo yes)
HAS_JANSSON := $(shell test -f /usr/include/jansson.h && echo yes)

# The library is every src/*/*.c except the CLI and the one MPI file.
MPI_SRC  := $(wildcard src/exec/comm_mpi.c)
LIB_SRC  := $(filter-out src/cli/% $(MPI_SRC),$(sort $(wildcard src/*/*.c)))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC := $(sort $(wildcard bench/bench_*.c))
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))

EXAMPLE_SRC := $(sort $(wildcard examples/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
MPI_OBJ  := $(MPI_SRC:%.c=$(BUILD)/%.o)
LIB      := $(BUILD)/libbigmac.a
TESTS    := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCHES  := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
# Programs with custom modules (examples/*.c) link the CLI (bm_train_main) without its main().
EXAMPLES := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
FUZZERS  := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/%)
PYTHON   ?= /usr/bin/python3
PYLIB    := $(BUILD)/python/_bigmac.so
PYLIB_CLI := $(BUILD)/src/cli/cmd_simulate.o $(BUILD)/src/cli/flags.o

# bin/bigmac links with mpicc when the executor's MPI file exists; otherwise with the
# single-process stand-in only.
ifneq ($(MPI_SRC),)
LINK := $(if $(MPICC),OMPI_CC=$(CC) $(MPICC),$(error mpicc not found: run `make deps`))
else
LINK := $(CC)
endif

.PHONY: all test asan run bench deps clean info fuzz fuzz-build fuzzers
all: info $(BIN)/bigmac $(EXAMPLES) $(PYLIB)

info:
	@echo "mpicc: $(if $(MPICC),yes,no)  openblas: $(if $(HAS_BLAS),yes,no)  jansson: $(if $(HAS_JANSSON),yes,no)  build: $(BUILD)"

$(BUILD)/%.o: %.c include/bigmac.h $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/src/exec/comm_mpi.o: src/exec/comm_mpi.c include/bigmac.h $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	OMPI_CC=$(CC) $(MPICC) $(CFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

$(BIN)/bigmac: $(CLI_OBJ) $(MPI_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(LINK) $(LDFLAGS) -o $@ $(CLI_OBJ) $(MPI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/examples/%: examples/%.c $(filter-out $(BUILD)/src/cli/main.o,$(CLI_OBJ)) $(MPI_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  EXAMPLE $<"
	@$(LINK) $(CFLAGS) $(LDFLAGS) -o $@ $< $(filter-out $(BUILD)/src/cli/main.o,$(CLI_OBJ)) $(MPI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/test.h $(LIB)
	@mkdir -p $(dir $@)
	@echo "  TEST    $<"
	@$(CC) $(CFLAGS) -Itests -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(wildcard bench/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

# The Python package's native half (python/bigmac, docs/python.md): the library's objects, the
# CLI pieces whose output the Python API matches (simulate --json) and the flat C interface
# python/bigmac/_capi.c, as one shared object loaded with ctypes. PYTHONPATH=python finds it.
$(PYLIB): python/bigmac/_capi.c $(LIB_OBJ) $(PYLIB_CLI)
	@mkdir -p $(dir $@)
	@echo "  PYLIB   $@"
	@$(CC) $(CFLAGS) -shared -Wl,--no-undefined -o $@ python/bigmac/_capi.c $(LIB_OBJ) $(PYLIB_CLI) \
	  $(LDFLAGS) $(LDLIBS)

test: all $(TESTS)
	@BIGMAC=$(BIN)/bigmac TEST_BUILD=$(BUILD) bash tests/run.sh

# ASan/UBSan build of everything in its own directories; leak detection on except for MPI
# tests (tests/run.sh sets detect_leaks=0 for those).
# The fuzz targets are sanitized builds already, so the asan pass runs them only briefly.
asan:
	@FUZZ_SHORT_SECONDS=$${FUZZ_SHORT_SECONDS:-3} $(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/bin OPT=-O1 \
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

deps:
	@missing=""; for p in $(DEPS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "installing:$$missing"; \
	  $$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y $$missing; \
	else echo "deps: all present ($(DEPS_PKGS))"; fi

clean:
	rm -rf build build-asan build-fuzz bin out

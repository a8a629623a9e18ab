# hamel — build, test, bench, run.
#
# `make` builds the engine library, the `hamel` CLI, the server and the tests.
# `make test` installs missing Debian packages, then runs the whole suite
# (normal build, then the same suites under -fsanitize=address,undefined).
# `make run` installs missing packages, builds and starts the server.
# `make SANITIZE=address,undefined` builds into build-san/ instead of build/.

SANITIZE ?=
ifeq ($(SANITIZE),)
BUILD ?= build
SANFLAGS :=
else
BUILD ?= build-san
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

CC ?= cc
OPT ?= -O2 -g
WERROR ?=
PKG_CONFIG ?= pkg-config

# The engine hashes with OpenSSL's libcrypto (engine/base/sha256.c: its SHA-256 code,
# without EVP, so nothing is initialised and no configuration file is read).
ENGINE_PKGS := gsl jansson libcrypto
SERVER_PKGS := libmicrohttpd hiredis zlib
CLIENT_PKGS := libcurl
TEST_PKGS := criterion

pkgcflags = $(shell $(PKG_CONFIG) --cflags $(1) 2>/dev/null)
pkglibs = $(shell $(PKG_CONFIG) --libs $(1) 2>/dev/null)

# The engine's layers (engine/DESIGN.md, "The layers"): each folder may include only
# from the folders before it; scripts/layers.sh checks that.
ENGINE_LAYERS := base expr code mech run
CPPFLAGS += -D_GNU_SOURCE -I. -Iengine $(patsubst %,-Iengine/%,$(ENGINE_LAYERS)) -Iserver -Iclients/c
CFLAGS := -std=c11 $(OPT) -Wall -Wextra -Wstrict-prototypes -MMD -MP $(SANFLAGS) $(WERROR) \
	$(call pkgcflags,$(ENGINE_PKGS) $(SERVER_PKGS) $(CLIENT_PKGS))
LDFLAGS += $(SANFLAGS)

ENGINE_LIBS := $(call pkglibs,$(ENGINE_PKGS)) -ltcc -ldl -lm -lpthread
SERVER_LIBS := $(call pkglibs,$(SERVER_PKGS)) -lsqlite3
CLIENT_LIBS := $(call pkglibs,$(CLIENT_PKGS))
TEST_LIBS := $(call pkglibs,$(TEST_PKGS))
# The one-shot CLI takes libcrypto, GSL and jansson from their static archives where
# they exist (Debian's -dev packages ship them): a `hamel run` process then maps and
# relocates libc and libm only. libcrypto's shared library alone cost 0.5 ms a run, GSL
# and jansson together 0.2 ms (issue 19, item 3). The other programs keep the shared
# ones: libcurl brings libcrypto into the tests and clients, and two copies of a library
# must not meet in one process.
cli_archive = $(shell $(CC) -print-file-name=lib$(1).a)
cli_static = $(if $(filter /%,$(call cli_archive,$(1))),$(call cli_archive,$(1)),-l$(1))
CLI_LIBS := $(foreach f,$(ENGINE_LIBS),$(if $(filter -lgsl -lgslcblas -ljansson -lcrypto,$(f)),$(call cli_static,$(f:-l%=%)),$(f)))

ENGINE_SRC := $(wildcard $(patsubst %,engine/%/*.c,$(ENGINE_LAYERS)) engine/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
CLIENT_SRC := $(filter-out clients/c/example.c,$(wildcard clients/c/*.c))
UNIT_SRC := $(wildcard tests/unit/*.c)
SRVTEST_SRC := $(wildcard tests/server/*.c)
CLUSTER_SRC := $(wildcard tests/cluster/*.c)
BENCH_SRC := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

LIBENGINE := $(BUILD)/libhamel.a
LIBSERVER := $(BUILD)/libhamelserver.a
LIBCLIENT := $(BUILD)/libhamelclient.a

BINS := $(BUILD)/hamel $(BUILD)/hamel-remote $(BUILD)/hamel-server $(BUILD)/hamelclient-example
TESTS := $(BUILD)/test-unit $(if $(SRVTEST_SRC),$(BUILD)/test-server) $(if $(CLUSTER_SRC),$(BUILD)/test-cluster)

.PHONY: all test test-fast run bench fmt lint clean deps difftest adversarial
all: $(BINS) $(TESTS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIBENGINE): $(call obj,$(ENGINE_SRC))
	@rm -f $@
	ar rcs $@ $^

$(LIBSERVER): $(call obj,$(SERVER_SRC))
	@rm -f $@
	ar rcs $@ $^

$(LIBCLIENT): $(call obj,$(CLIENT_SRC))
	@rm -f $@
	ar rcs $@ $^

# The one-shot CLI links the engine only (and the server's table of problem statuses,
# server/problems.c, so its problem documents are the API's): `hamel remote` execs hamel-remote (beside it,
# else on PATH), so a local run does not load libcurl and what it pulls in (issue 19).
# Not position-independent: the loader has no 17,000 relocations of the static libraries
# to apply and their pages to copy at every start (a whole `hamel run` of the rolling
# disk 1.82x the hand-written C process instead of 1.99x, scripts/bench-cli.sh); the
# network-facing server stays PIE.
$(BUILD)/hamel: $(call obj,cli/hamel.c clients/c/hameltext.c server/problems.c) $(LIBENGINE)
	$(CC) $(LDFLAGS) -no-pie $^ -o $@ $(CLI_LIBS)

$(BUILD)/hamel-remote: $(call obj,cli/hamel-remote.c) $(LIBCLIENT)
	$(CC) $(LDFLAGS) $^ -o $@ $(call pkglibs,jansson) $(CLIENT_LIBS)

# The C client's example program (clients/c/README.md), run against a server by the tests.
$(BUILD)/hamelclient-example: $(call obj,clients/c/example.c) $(LIBCLIENT)
	$(CC) $(LDFLAGS) $^ -o $@ $(call pkglibs,jansson) $(CLIENT_LIBS)

$(BUILD)/hamel-server: $(call obj,server/main.c) $(LIBSERVER) $(LIBENGINE)
	$(CC) $(LDFLAGS) $^ -o $@ $(SERVER_LIBS) $(ENGINE_LIBS)

$(BUILD)/test-unit: $(call obj,$(UNIT_SRC)) $(LIBENGINE)
	$(CC) $(LDFLAGS) $^ -o $@ $(TEST_LIBS) $(ENGINE_LIBS)

$(BUILD)/test-server: $(call obj,$(SRVTEST_SRC)) $(if $(CLIENT_SRC),$(LIBCLIENT)) $(LIBSERVER) $(LIBENGINE) | $(BUILD)/hamel-server
	$(CC) $(LDFLAGS) $^ -o $@ $(TEST_LIBS) $(CLIENT_LIBS) $(SERVER_LIBS) $(ENGINE_LIBS)

# Three servers on Redis behind nginx (tests/cluster), with the server tests' harness.
$(BUILD)/test-cluster: $(call obj,$(CLUSTER_SRC) tests/server/harness.c) | $(BUILD)/hamel-server
	$(CC) $(LDFLAGS) $^ -o $@ $(TEST_LIBS) $(CLIENT_LIBS) $(ENGINE_LIBS)

# $< and the library, not $^: the -MMD dependency file adds the included sources.
$(BUILD)/bench-%: bench/%.c $(LIBENGINE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< $(LIBENGINE) -o $@ $(ENGINE_LIBS) $(CLIENT_LIBS)

# bench/store_put.c times the server's store: it links the server library too.
$(BUILD)/bench-store_put: bench/store_put.c $(LIBSERVER) $(LIBENGINE)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< $(LIBSERVER) $(LIBENGINE) -o $@ $(SERVER_LIBS) $(ENGINE_LIBS)

# The README's two commands.
run:
	@scripts/run.sh

test:
	@scripts/test.sh

# The suite on an already set-up machine, without the sanitizer pass.
test-fast: all
	@HAMEL_TEST_FAST=1 scripts/run-tests.sh

# A longer differential campaign against SymPy: make difftest N=500 [SEED=1000]
# (random models from seed SEED on, plus the corpus); reports N, the time and every
# disagreement, and keeps the disagreeing models in build/difftest-failures.
N ?= 200
SEED ?= 1000
difftest: $(BUILD)/hamel
	@tests/difftest/run.sh --seeds $(SEED):$$(($(SEED) + $(N))) --save $(BUILD)/difftest-failures

# The adversarial mechanical cases (tests/adversarial/models.py) against an independent
# SymPy derivation (Debian's /usr/bin/python3 with python3-sympy and python3-scipy):
# evaluate, gamma, run, energy and invariants. WRITE=1 rewrites tests/adversarial/cases,
# which the unit suite (adversarial/*) checks without Python.
adversarial: $(BUILD)/hamel
	@/usr/bin/python3 tests/adversarial/derive.py --hamel $(BUILD)/hamel $(if $(WRITE),--write)

bench:
	@scripts/install-deps.sh bench
	@scripts/bench.sh

deps:
	@scripts/install-deps.sh

# The web front end has no build step; this refreshes its examples from the shared cases.
.PHONY: web
web:
	@clients/web/tools/make-examples.sh

# Fuzzing: libFuzzer targets for the expression parser, model
# compilation, requests (simulation, Hamel coefficients) against a fixed model, and whole
# cases (fuzz_case: a model and every request on it, a structure-aware mutator), built
# with clang into build/fuzz/ and run FUZZ_TIME seconds each.
# Crashes and hangs are written to build/fuzz/crash-* / timeout-*; the corpora grow in
# build/fuzz/corpus-*. The test command runs each for a few seconds from its committed
# corpus (tests/fuzz/run.sh).
FUZZ_CC ?= clang
FUZZ_TIME ?= 60
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -g -O1 -MMD -MP -fsanitize=fuzzer-no-link $(FUZZ_SAN) \
	$(call pkgcflags,$(ENGINE_PKGS))
FUZZ_RUN := -max_total_time=$(FUZZ_TIME) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
FUZZ_OBJ := $(patsubst %.c,$(FUZZ_DIR)/%.o,$(ENGINE_SRC) $(wildcard tests/fuzz/*.c))
.SECONDARY: $(FUZZ_OBJ)

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_DIR)/fuzz_parse $(FUZZ_DIR)/fuzz_model $(FUZZ_DIR)/fuzz_request $(FUZZ_DIR)/fuzz_case

fuzz: fuzz-build
	@mkdir -p $(FUZZ_DIR)/corpus-parse $(FUZZ_DIR)/corpus-model $(FUZZ_DIR)/corpus-request $(FUZZ_DIR)/corpus-case
	@for f in ../shared/cases/*.json; do [ -f "$$f" ] && jq -c .model "$$f" \
		> $(FUZZ_DIR)/corpus-model/shared-$$(basename "$$f") || true; done
	$(FUZZ_DIR)/fuzz_parse $(FUZZ_RUN) -dict=tests/fuzz/expr.dict -artifact_prefix=$(FUZZ_DIR)/ \
		$(FUZZ_DIR)/corpus-parse tests/fuzz/corpus/parse
	$(FUZZ_DIR)/fuzz_model $(FUZZ_RUN) -dict=tests/fuzz/model.dict -artifact_prefix=$(FUZZ_DIR)/ \
		$(FUZZ_DIR)/corpus-model tests/fuzz/corpus/model
	$(FUZZ_DIR)/fuzz_request $(FUZZ_RUN) -dict=tests/fuzz/request.dict -artifact_prefix=$(FUZZ_DIR)/ \
		$(FUZZ_DIR)/corpus-request tests/fuzz/corpus/request
	$(FUZZ_DIR)/fuzz_case $(FUZZ_RUN) -max_len=20000 -dict=tests/fuzz/case.dict -artifact_prefix=$(FUZZ_DIR)/ \
		$(FUZZ_DIR)/corpus-case tests/fuzz/corpus/case

$(FUZZ_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/fuzz_%: $(FUZZ_DIR)/tests/fuzz/fuzz_%.o $(filter $(FUZZ_DIR)/engine/%,$(FUZZ_OBJ))
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) $^ -o $@ $(ENGINE_LIBS)

fmt:
	clang-format -i $$(git ls-files '*.c' '*.h' ':!:api/examples/*')

lint:
	@scripts/lint.sh

clean:
	rm -rf build build-san build-tsan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

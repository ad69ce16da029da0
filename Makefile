# kiln — top-level entry points. Each target works from a fresh clone on
# Debian 12: it first installs missing packages (scripts/install-deps.sh,
# a no-op when everything is present), then configures and builds with CMake.
#
#   make demo      build (build/) and train the default model on Fashion-MNIST
#                  (kiln train; DEMO_ARGS adds options, e.g. DEMO_ARGS='--model cnn')
#   make test      the whole suite, then again under ASan+UBSan (build-asan/)
#   make tsan      thread pool / executor tests under ThreadSanitizer (build-tsan/)
#   make fuzz      libFuzzer harnesses for FUZZ_SECONDS each (build-fuzz/, clang)
#   make difftest  the differential test against NumPy, N programs (default 20000) on
#                  both backends (tests/diff/; a short run is part of make test)
#   make bench     Release build (build-release/), benchmarks, BENCHMARKS.md
#   make install   install headers, libraries, `kiln`, pkg-config and CMake files
#                  (PREFIX=/usr/local by default)
#   make clean     remove every build directory
#
# Variables: JOBS (parallel jobs, default 2), FUZZ_SECONDS (default 60),
# TSAN_TESTS (regex of test names for make tsan), PREFIX, BUILD (prefix of
# the build directories, default "build": build/, build-asan/, ...).

JOBS ?= 2
FUZZ_SECONDS ?= 60
BUILD_TYPE ?= RelWithDebInfo
BUILD ?= build
export JOBS FUZZ_SECONDS BUILD
# cmake --build runs make underneath: keep its output free of directory noise.
MAKEFLAGS += --no-print-directory

.PHONY: all deps build demo test tsan fuzz bench install clean help difftest

all: build

help:
	@sed -n '1,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@bash scripts/install-deps.sh

build: deps
	@bash scripts/build.sh $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

DEMO_ARGS ?=
demo: build
	@$(BUILD)/bin/kiln train --checkpoint $(BUILD)/fashion-mnist.safetensors --logdir $(BUILD)/tensorboard $(DEMO_ARGS)

test: deps
	@bash scripts/test.sh

tsan: deps
	@bash scripts/tsan.sh

fuzz: deps
	@bash scripts/fuzz.sh

N ?= 20000
SEED ?= 1
difftest: deps
	@bash scripts/build.sh $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -- diff_run
	@mkdir -p $(BUILD)/difftest-cache
	@KILN_CACHE_DIR=$(CURDIR)/$(BUILD)/difftest-cache /usr/bin/python3 tests/diff/difftest.py \
	  --run $(BUILD)/bin/tests/diff_run --programs $(N) --seed $(SEED)

bench: deps
	@bash scripts/install-deps.sh --bench
	@bash scripts/build.sh $(BUILD)-release -DCMAKE_BUILD_TYPE=Release
	@bash bench/run.sh $(BUILD)-release

# The prefix is given at configure time too: GNUInstallDirs picks the library
# directory from it (lib/<multiarch> for /usr). kiln.pc is relocatable.
install: deps
	@bash scripts/build.sh $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(if $(PREFIX),-DCMAKE_INSTALL_PREFIX=$(PREFIX))
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz $(BUILD)-release

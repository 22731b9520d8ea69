# Thin driver over CMake. The README's two commands:
#   make run    install what is missing, build, start bloomkit-server on ./data
#   make test   install what is missing, build, run every test: an optimised
#               build, an ASan+UBSan build, and a TSan build of the threaded tests
#
# Other targets: make (build), make demo (the library demo), make install
# [PREFIX=/usr/local], make bench, make fuzz [FUZZ_TIME=s], make clean.
#
# Output is quiet by default: CMake's progress lines and what fails, without
# make's "Entering/Leaving directory" pair for each of CMake's recursive
# makes. make V=1 shows everything, every compiler command line included.

JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
PREFIX ?= /usr/local
BUILD  := build

CMAKE_RELEASE := cmake -S . -B $(BUILD)/release -DCMAKE_BUILD_TYPE=Release
CMAKE_ASAN    := cmake -S . -B $(BUILD)/asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                 -DBK_SANITIZE=ON -DBK_EXAMPLES=OFF
CMAKE_TSAN    := cmake -S . -B $(BUILD)/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                 -DBK_TSAN=ON -DBK_EXAMPLES=OFF
CTEST         := ctest --output-on-failure -j$(JOBS) --timeout 600

ifeq ($(V),1)
BUILD_FLAGS := --verbose
else
# MAKEFLAGS reaches the makes that cmake --build runs through the
# environment, so they stop announcing every directory too.
MAKEFLAGS += --no-print-directory
BUILD_FLAGS :=
endif

.PHONY: all deps build run demo test test-release test-asan test-tsan install \
        bench fuzz clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@$(CMAKE_RELEASE) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD)/release -j$(JOBS) $(BUILD_FLAGS)

# The main job: bloomkit-server on 127.0.0.1:6380 with its data in ./data
# (extra flags: make run ARGS="--port 7000 --appendfsync always").
run: build
	$(BUILD)/release/server/bloomkit-server --dir ./data $(ARGS)

demo: build
	$(BUILD)/release/examples/bloomkit-demo

test: deps
	@$(MAKE) test-release test-asan test-tsan
	@echo "make test: all suites passed (release, asan+ubsan, tsan)"

test-release:
	@echo "== optimised build =="
	@$(CMAKE_RELEASE) >/dev/null
	@cmake --build $(BUILD)/release -j$(JOBS) $(BUILD_FLAGS)
	@cd $(BUILD)/release && $(CTEST)

test-asan:
	@echo "== AddressSanitizer + UndefinedBehaviorSanitizer build =="
	@$(CMAKE_ASAN) >/dev/null
	@cmake --build $(BUILD)/asan -j$(JOBS) $(BUILD_FLAGS)
	@cd $(BUILD)/asan && $(CTEST)

test-tsan:
	@echo "== ThreadSanitizer build (threaded tests) =="
	@$(CMAKE_TSAN) >/dev/null
	@cmake --build $(BUILD)/tsan -j$(JOBS) $(BUILD_FLAGS)
	@cd $(BUILD)/tsan && $(CTEST) -L threads

install: build
	cmake --install $(BUILD)/release --prefix $(PREFIX)

bench:
	@scripts/install-deps.sh --bench
	@cmake -S . -B $(BUILD)/bench -DCMAKE_BUILD_TYPE=Release -DBK_BENCH=ON \
	    -DBK_TESTS=OFF -DBK_EXAMPLES=OFF >/dev/null
	@cmake --build $(BUILD)/bench -j$(JOBS) $(BUILD_FLAGS)
	@echo "benchmarks built in $(BUILD)/bench/bench/"

# make fuzz [FUZZ_TIME=seconds per target, default 60]: libFuzzer under clang
# with ASan+UBSan, each target seeded from fuzz/corpus/<target>; new inputs
# go to build/fuzz/work/<target> (copy the interesting ones into the corpus).
FUZZ_TIME ?= 60
FUZZ_TARGETS = $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c))
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD)/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DBK_FUZZ=ON -DBK_TESTS=OFF -DBK_EXAMPLES=OFF >/dev/null
	@cmake --build $(BUILD)/fuzz -j$(JOBS) $(BUILD_FLAGS)
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(BUILD)/fuzz/work/$$t; \
	    echo "== fuzz_$$t for $(FUZZ_TIME) s =="; \
	    $(BUILD)/fuzz/fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME) -print_final_stats=1 \
	        -rss_limit_mb=4096 $(BUILD)/fuzz/work/$$t fuzz/corpus/$$t || exit 1; \
	done

clean:
	rm -rf $(BUILD)

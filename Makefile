# Entry points an operator or CI uses. Each target installs missing Debian packages first.
# -O2 without debug info (asserts stay on) keeps a clean build on a 2-core CI machine short.
BUILD ?= build
JOBS ?= 2
# `make fuzz`: every libFuzzer target (tests/fuzz, built by clang++ in its own sub-build, which
# `make build` and `make test` leave out) for FUZZ_SECONDS, JOBS at a time, each into a corpus
# kept in $(BUILD)/tests/fuzz/work/corpus/<target>; a summary line per target. `make test` runs
# the same targets' replay builds (seeds and fixed mutants, label "fuzz").
FUZZ_SECONDS ?= 600
# `make test-asan`: the whole suite under ASan+UBSan ($(ASAN_BUILD)), then the aggregator's tests
# (its threads: ingest loop, HTTP server, verdict ticks, relay) under TSan ($(TSAN_BUILD)). clang
# builds both (either compiler works; clang's UBSan checks more), -O1 keeps the stacks readable.
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SANITIZER_CMAKE = -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
	"-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DFAULTLINE_FUZZ=OFF

# `make package`: the .deb files in $(PACKAGE_BUILD), a build of its own with only the build
# dependencies (scripts/install-deps.sh --package: no tests, so no Catch2, PostgreSQL server,
# Chromium or npm on a packaging host) and only the three packaged binaries built.
PACKAGE_BUILD ?= build-package

.PHONY: all deps package-deps configure build demo test bench clean package fuzz test-asan chaos

all: build

deps:
	@bash scripts/install-deps.sh

package-deps:
	@bash scripts/install-deps.sh --package

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Only the fuzz sub-build is built (the clang-built targets), not the rest of the project.
fuzz: configure
	cmake --build $(BUILD) -j$(JOBS) --target faultline_fuzzers
	cd $(BUILD) && FAULTLINE_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest -C fuzz -L libfuzzer -j$(JOBS) --output-on-failure \
		--timeout $$(( $(FUZZ_SECONDS) + 600 )) -V > fuzz.log 2>&1; rc=$$?; \
		grep -E '^[0-9]+: (fuzz_|fuzz:|==)|tests passed|Failed' fuzz.log; exit $$rc

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) $(SANITIZER_CMAKE) -DFAULTLINE_SANITIZE=address,undefined
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j$(JOBS) -LE no-sanitizer
	cmake -S . -B $(TSAN_BUILD) $(SANITIZER_CMAKE) -DFAULTLINE_SANITIZE=thread
	cmake --build $(TSAN_BUILD) -j$(JOBS) --target aggregator_test
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp \
		ctest --output-on-failure -j$(JOBS) -R '^aggregator_test:' -LE no-sanitizer

# `make chaos`: the long chaos run (tests/chaos/chaos_driver.cpp): agents, a site relay and a central
# SIGKILLed (>= CHAOS_KILLS kills in all), links cut, a spool filled, clocks stepped, the journal
# rotated and vacuumed, and one agent flooded at 100,000 lines/s for a minute; prints its table.
CHAOS_SEED ?= 1
CHAOS_KILLS ?= 200
CHAOS_SECONDS ?= 180
chaos: configure
	cmake --build $(BUILD) -j$(JOBS) --target chaos_driver
	$(BUILD)/tests/chaos/chaos_driver --seed $(CHAOS_SEED) --seconds $(CHAOS_SECONDS) --min-kills $(CHAOS_KILLS) \
		--fault-ms 400 --flood-seconds 60 --flood-rate 100000 --drain-seconds 300 --disk-restarts true \
		--site-clock-steps true --central-clock-steps true

package: package-deps
	cmake -S . -B $(PACKAGE_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 \
		-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -DBUILD_TESTING=OFF -DFAULTLINE_FUZZ=OFF
	cmake --build $(PACKAGE_BUILD) -j$(JOBS) --target faultline faultline-agent faultline-aggregator
	cd $(PACKAGE_BUILD) && cpack -G DEB

bench: build
	cmake --build $(BUILD) -j$(JOBS) --target faultline_bench
	@bash bench/startup.sh $(BUILD)
	@bash bench/extract.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(PACKAGE_BUILD)

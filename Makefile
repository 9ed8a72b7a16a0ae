# Entry points an operator or CI uses. Each target installs missing Debian packages first.
# -O2 without debug info (asserts stay on) keeps a clean build on a 2-core CI machine short.
BUILD ?= build
JOBS ?= 2

.PHONY: all deps configure build demo test bench clean package

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

package: build
	cd $(BUILD) && cpack -G DEB

bench: build
	@bash bench/extract.sh $(BUILD)

clean:
	rm -rf $(BUILD)

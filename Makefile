# Entry points an operator or CI uses. Each target installs missing Debian packages first.
# Release (no debug info) keeps a clean build on a 2-core CI machine short.
BUILD ?= build
JOBS ?= 2

.PHONY: all deps configure build demo test bench clean package

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

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

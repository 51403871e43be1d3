# The two commands a newcomer needs:  make demo  and  make test.
BUILD ?= build
JOBS ?= $(shell nproc)
NPROC ?= 4
# libtorch: the torch wheel in this virtual environment (scripts/install-deps.sh makes it).
LOOM_VENV ?= $(HOME)/.local/share/loom/venv
export LOOM_VENV
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export OMP_NUM_THREADS := 1
export MKL_NUM_THREADS := 1

.PHONY: deps build demo test test-fast bench docs format format-check lint clean gpu-bundle

deps:
	@bash scripts/install-deps.sh

# The wheel's folder, asked of the venv's python when a recipe that uses it runs (after deps
# made the venv): make expands a recipe only then.
torch_dir = $(shell "$(LOOM_VENV)/bin/python" -c "import importlib.util as u; print(u.find_spec('torch').submodule_search_locations[0])")

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$(torch_dir)/share/cmake;$(torch_dir)"

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# Trains the byte-level GPT on the fortunes corpus on $(NPROC) local ranks (pp=2 x dp=2,
# breadth-first schedule with 2 loops) for about two minutes.
demo: build
	bash scripts/demo.sh $(BUILD) $(NPROC)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 900

# Only the fast unit tests (no MPI, seconds in all); `make test` also runs the slow ones.
test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j 2 -L unit

bench: build
	bash bench/run_all.sh $(BUILD)

# Regenerates docs/guide/configuration.md from the configuration schema (test cli_config_reference).
docs: build
	$(BUILD)/bin/loom train --help-markdown > docs/guide/configuration.md.tmp
	mv docs/guide/configuration.md.tmp docs/guide/configuration.md

# What a lent GPU machine needs from here (docs/gpu.md): gpu-bundle/ with the libraries it lacks,
# the fortunes corpus and a loom binary built without MPI (the same torch wheel as there).
gpu-bundle: deps
	cmake -S . -B build-gpu-prebuilt -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WITH_MPI=OFF \
	  -DLOOM_BUILD_TESTS=OFF "-DCMAKE_PREFIX_PATH=$(torch_dir)/share/cmake;$(torch_dir)"
	cmake --build build-gpu-prebuilt --target loom -j $(JOBS)
	LOOM_PREBUILT=build-gpu-prebuilt/bin/loom bash scripts/gpu-bundle.sh

# Style: clang-format rewrites every source file; format-check only reports (CI runs it).
format:
	bash scripts/format.sh

format-check:
	bash scripts/format.sh --check

# clang-tidy on the C++ files changed since LINT_BASE (default HEAD~1; on a branch: LINT_BASE=main).
lint: build
	bash scripts/lint.sh $(BUILD) $(LINT_BASE)

clean:
	rm -rf $(BUILD)

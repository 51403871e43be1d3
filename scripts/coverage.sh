#!/usr/bin/env bash
# Which lines of src/ the test suite runs: a build with gcov instrumentation (-O1) in its own
# folder, the whole suite there, then gcovr's table with the files that miss the most lines.
#   bash scripts/coverage.sh [BUILD_FOLDER]     (default /tmp/loom-coverage; ~25 + 15 minutes
#                                                 on 2 cores)
# Lines of a process that ends through _Exit or MPI_Abort (a rank brought down on purpose) are
# not counted: gcov writes its counts at a normal exit. Needs gcovr (apt-get install gcovr).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-/tmp/loom-coverage}")
command -v gcovr >/dev/null || { echo "coverage: gcovr is missing; apt-get install gcovr" >&2; exit 2; }
flags="-O1 -g --coverage"
CCACHE_DISABLE=1 cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Coverage \
  "-DCMAKE_CXX_FLAGS_COVERAGE=$flags" "-DCMAKE_C_FLAGS_COVERAGE=$flags" \
  -DCMAKE_EXE_LINKER_FLAGS_COVERAGE=--coverage -DCMAKE_SHARED_LINKER_FLAGS_COVERAGE=--coverage >/dev/null
CCACHE_DISABLE=1 cmake --build "$build"
find "$build" -name '*.gcda' -delete
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
(cd "$build" && ctest -j2 --timeout 1800) || echo "coverage: some tests failed (above); the counts stand"
gcovr -r "$repo" --filter "$repo/src/" --object-directory "$build" -j 2 --gcov-ignore-parse-errors \
  --txt "$build/coverage.txt"
grep '^TOTAL' "$build/coverage.txt"
echo "files missing the most lines (missed, covered share, file):"
grep '^src' "$build/coverage.txt" | awk '{print $2 - $3, $4, $1}' | sort -rn | head -20
echo "whole table: $build/coverage.txt"

#!/usr/bin/env bash
# Prints a digest of the files a loom binary is built from (CMakeLists.txt, cmake/, src/), by
# path and content. scripts/gpu-bundle.sh stores it beside the prebuilt binary; bench/gpu_check.sh
# compares it on the GPU machine and builds there instead of running a binary that predates
# the sources it was carried with. Needs only find and sha256sum.
set -euo pipefail
cd "$(dirname "$0")/.."
find CMakeLists.txt cmake src -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
  sha256sum | cut -c1-16

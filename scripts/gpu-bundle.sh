#!/usr/bin/env bash
# Packs what a loom build needs on the lent GPU machine and that machine lacks (it has torch,
# nvcc, CMake and ninja, but no Debian -dev packages and no network) into gpu-bundle/
# (git-ignored; the device tool carries it when named in `carry`): the toml++ headers, CMake
# package and library, zlib's headers and shared library, gloo's headers (c10d's Gloo header
# includes them), nlohmann/json, and zstd and SentencePiece (headers, pkg-config files and
# shared libraries; bench/gpu_check.sh points pkg-config at the bundle as a sysroot). Copied from this machine's packages
# (scripts/install-deps.sh installs them); about 7 MiB. scripts/gpu-rehearsal.sh tries a build
# with only these. Also the fortunes corpus (bench/schedule_ab.sh's data, 2.8 MiB) and, with
# LOOM_PREBUILT=BINARY, a loom binary built here without MPI (`make gpu-bundle`), stripped, as
# bin/loom, with the digest of its sources (scripts/sources-digest.sh) as bin/loom.sources: the
# check runs it when it starts there (same torch wheel, the bundle's libraries) and was built
# from the sources carried with it, and builds loom on the machine only when not, which saves
# the build's minutes of the lease.
#   [LOOM_PREBUILT=build-gpu-prebuilt/bin/loom] bash scripts/gpu-bundle.sh [FOLDER]
#   bash scripts/gpu-bundle.sh --list        (the packages, for scripts/gpu-rehearsal.sh)
set -euo pipefail
packages=(libtomlplusplus-dev libtomlplusplus3 zlib1g-dev libgloo-dev nlohmann-json3-dev
  libzstd-dev libzstd1 libsentencepiece-dev libsentencepiece0)
if [ "${1:-}" = --list ]; then echo "${packages[@]}"; exit 0; fi
out=${1:-gpu-bundle}
rm -rf "$out"
mkdir -p "$out"
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || { echo "gpu-bundle: $pkg is not installed; run scripts/install-deps.sh" >&2; exit 2; }
  dpkg -L "$pkg" | while read -r f; do
    case "$f" in /usr/share/doc/*) continue ;; esac
    if [ -f "$f" ] || [ -L "$f" ]; then
      mkdir -p "$out$(dirname "$f")"
      cp -a "$f" "$out$f"
    fi
  done
done
# zlib's -dev package links libz.so to the runtime library by an absolute path: copy the file.
lib=$(readlink -f /usr/lib/x86_64-linux-gnu/libz.so)
rm -f "$out/usr/lib/x86_64-linux-gnu/libz.so"
cp "$lib" "$out/usr/lib/x86_64-linux-gnu/libz.so"
mkdir -p "$out/fortunes"
cp /usr/share/games/fortunes/* "$out/fortunes/"
rm -f "$out"/fortunes/*.dat "$out"/fortunes/*.u8
if [ -n "${LOOM_PREBUILT:-}" ]; then
  mkdir -p "$out/bin"
  strip -o "$out/bin/loom" "$LOOM_PREBUILT"
  if ldd "$out/bin/loom" | grep -q libmpi; then
    echo "gpu-bundle: $LOOM_PREBUILT links Open MPI, which the GPU machine lacks; build it with -DLOOM_WITH_MPI=OFF" >&2
    exit 2
  fi
  # The sources it was built from, for bench/gpu_check.sh to tell a stale binary (the build
  # folder may lag the checkout: build it first, as `make gpu-bundle` does).
  bash "$(dirname "$0")/sources-digest.sh" >"$out/bin/loom.sources"
fi
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out"

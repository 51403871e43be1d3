#!/usr/bin/env bash
# Installs, idempotently, everything a fresh Debian 12 machine needs to build, test and run loom.
# Only packages that are missing are installed; a machine that has them all does nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev            # tensors, autograd, optimizers (libtorch 1.13)
  libopenblas0-pthread    # fast BLAS; Debian's reference BLAS makes libtorch ~30x slower
  openmpi-bin libopenmpi-dev
  libgtest-dev googletest
  libtomlplusplus-dev     # configuration files
  libcli11-dev            # command-line parsing
  libfmt-dev
  zlib1g-dev              # gzipped IDX files
  dataset-fashion-mnist   # /usr/share/datasets/fashion-mnist
  fortunes                # ~1 MB of English text under /usr/share/games/fortunes
)
if [[ "${LOOM_WITH_PEER:-0}" == 1 ]]; then
  packages+=(python3-torch)  # only for the DDP peer benchmark
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "[install-deps] installing: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Make sure the optimized BLAS is the active libblas.so.3 alternative (the reference BLAS is ~30x slower).
if command -v update-alternatives >/dev/null; then
  alt=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')
  if [[ -n "$alt" && "$alt" != *openblas* ]]; then
    cand=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu | grep openblas | head -n1 || true)
    if [[ -n "$cand" ]]; then
      ${SUDO:-} update-alternatives --set libblas.so.3-x86_64-linux-gnu "$cand" >/dev/null
      echo "[install-deps] BLAS set to $cand"
    fi
  fi
  lapack=$(update-alternatives --query liblapack.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')
  if [[ -n "$lapack" && "$lapack" != *openblas* ]]; then
    cand=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu | grep openblas | head -n1 || true)
    [[ -n "$cand" ]] && ${SUDO:-} update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$cand" >/dev/null
  fi
fi
exit 0

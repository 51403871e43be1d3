#!/usr/bin/env bash
# Installs, idempotently, everything a fresh Debian 12 machine needs to build, test and run loom.
# Only packages that are missing are installed; a machine that has them all does nothing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  clang-format clang-tidy # make format, make lint
  python3 python3-venv    # the virtual environment that holds libtorch (PyPI's torch wheel)
  openmpi-bin libopenmpi-dev
  libgtest-dev googletest
  libtomlplusplus-dev     # configuration files
  libgloo-dev             # headers only: c10d's ProcessGroupGloo.hpp includes gloo's
  zlib1g-dev              # gzipped IDX files
  libzstd-dev             # --quant.entropy: the quantized codes entropy-coded
  nlohmann-json3-dev      # JSON of Hugging Face model folders (config.json, safetensors)
  libsentencepiece-dev    # subword tokenizers (loom tokenizer, data.tokenizer)
  dataset-fashion-mnist   # /usr/share/datasets/fashion-mnist
  fortunes                # ~1 MB of English text under /usr/share/games/fortunes
)

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

# libtorch comes from PyPI's torch wheel (it bundles MKL) in a virtual environment; the wheels
# are gigabytes, so an environment that already has the version is left alone.
torch_version=2.11.0
venv=${LOOM_VENV:-$HOME/.local/share/loom/venv}
if [[ ! -x "$venv/bin/python" ]]; then
  echo "[install-deps] creating $venv"
  python3 -m venv "$venv"
fi
have=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
if [[ "$have" != "$torch_version"* ]]; then
  echo "[install-deps] installing torch==$torch_version into $venv (several GB)"
  "$venv/bin/python" -m pip install -q "torch==$torch_version"
fi
# The Hugging Face peers of `loom export` / `loom import` (tests/cli/hf_test.sh): transformers
# loads the exported folders, safetensors reads and writes the weights.
if ! "$venv/bin/python" -c 'import transformers, safetensors' 2>/dev/null; then
  echo "[install-deps] installing transformers and safetensors into $venv"
  "$venv/bin/python" -m pip install -q "transformers>=4.45,<5" "safetensors>=0.4"
fi
# DeepSpeed, the peer of bench/peers_compare.sh's 1f1b row (its PipelineEngine on CPU): pure
# Python with DS_BUILD_OPS=0 (its first CPU run JIT-builds one small op, cached after).
if ! "$venv/bin/python" -c 'import deepspeed' 2>/dev/null; then
  echo "[install-deps] installing deepspeed into $venv"
  DS_BUILD_OPS=0 "$venv/bin/python" -m pip install -q "deepspeed==0.19.8"
fi
exit 0

#!/usr/bin/env bash
# Rehearses bench/gpu_check.sh here as the lent GPU machine would run it, as far as a machine
# without a GPU can: inside a private mount namespace, /usr is seen through an overlay that
# lacks what the GPU machine lacks (the Debian -dev packages and libraries gpu-bundle/ carries,
# pkg-config, GoogleTest, Open MPI's headers), then the check builds loom from scratch against
# gpu-bundle/ and runs its CPU dry run. Needs root (unshare, mount). Run it after changing a
# dependency, before a session with a GPU spends its minutes on a build that cannot succeed.
#   bash scripts/gpu-rehearsal.sh [WORK_FOLDER]      (default /tmp/loom-gpu-rehearsal)
set -euo pipefail
work=$(realpath -m "${1:-/tmp/loom-gpu-rehearsal}")
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" != 0 ]; then echo "gpu-rehearsal: needs root (unshare -m, mount)" >&2; exit 2; fi
if [ -z "${LOOM_REHEARSAL_INSIDE:-}" ]; then
  (cd "$repo" && bash scripts/gpu-bundle.sh)
  rm -rf "$work"
  mkdir -p "$work"
  LOOM_REHEARSAL_INSIDE=1 exec unshare -m --propagation private bash "$0" "$work"
fi

# Inside the namespace: /usr without the packages (whiteouts in the overlay's upper folder).
ov="$work/overlay"
mkdir -p "$ov/upper" "$ov/work" "$ov/usr"
mount -t overlay overlay -o "lowerdir=/usr,upperdir=$ov/upper,workdir=$ov/work" "$ov/usr"
# The bundle's packages (but libzstd1: this machine's cmake links it, the GPU machine's cmake
# is its own) and what the check's build must not need: GoogleTest, Open MPI, pkg-config.
for pkg in $(bash "$repo/scripts/gpu-bundle.sh" --list) libgtest-dev libopenmpi-dev pkgconf \
    pkg-config pkgconf-bin; do
  [ "$pkg" = libzstd1 ] && continue
  dpkg -L "$pkg" 2>/dev/null | while read -r f; do
    case "$f" in /usr/share/doc/*) continue ;; /usr/*) ;; *) continue ;; esac
    if [ -f "$f" ] || [ -L "$f" ]; then rm -f "$ov/usr${f#/usr}"; fi
  done
done
mount --bind "$ov/usr" /usr
hash -r
if command -v pkg-config >/dev/null || [ -e /usr/include/toml++/toml.hpp ]; then
  echo "gpu-rehearsal: the packages are still visible; stopping" >&2; exit 1
fi
cd "$repo"
LOOM_GPU_BUILD="$work/build" OUT="$work/out" LOOM_CHECK_DEVICE=cpu LOOM_CHECK_SMALL=1 CCACHE_DISABLE=1 \
  bash bench/gpu_check.sh
echo "gpu-rehearsal: the check passed; libraries loom loads from the bundle:"
LD_LIBRARY_PATH="$repo/gpu-bundle/usr/lib/x86_64-linux-gnu" ldd "$work/build/bin/loom" |
  grep -E 'not found|gpu-bundle' || true

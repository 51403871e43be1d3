#!/usr/bin/env bash
# The loom binary links libtorch_cuda when built with a CUDA toolkit, never a driver (or its
# stub: libcuda.so.1 exists only where a GPU driver is installed), and starts on a machine
# without one.
# usage: linkage_test.sh LOOM_BINARY HAVE_CUDA(0|1)
set -u
loom=$1 have_cuda=$2
needed=$(readelf -d "$loom" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p')
fails=0
if grep -q '^libcuda\.so' <<<"$needed"; then
  echo "FAIL: $loom records a dependency on the driver: $(grep '^libcuda' <<<"$needed")"; fails=1
fi
if [[ $have_cuda == 1 ]] && ! grep -q '^libtorch_cuda\.so' <<<"$needed"; then
  echo "FAIL: a CUDA build does not link libtorch_cuda (NEEDED: $(tr '\n' ' ' <<<"$needed"))"; fails=1
fi
if ! "$loom" doctor >/dev/null 2>&1; then
  echo "FAIL: $loom doctor does not run here"; fails=1
fi
echo "NEEDED: $(tr '\n' ' ' <<<"$needed")"
if [[ $fails -eq 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $fails

# Sourced by CLI test scripts after they set $tmp: the MPI environment of a root container,
# one compute thread per rank, and the pass/fail counters with ok NAME / fail NAME (fail shows
# the last command's $tmp/stderr).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
fails=0
passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
fail() { echo "FAIL $1"; cat "$tmp/stderr" 2>/dev/null; fails=$((fails + 1)); }

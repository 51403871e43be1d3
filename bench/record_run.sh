# shellcheck shell=bash
# Sourced by the comparison scripts in bench/: record_run DIR NAME CMD... runs one training run
# (its output in DIR.log) and writes its wall time and command line to DIR/command.json, which
# the report scripts read. A failed run stops the script with the log's name.
record_run() {
  local dir=$1 name=$2
  shift 2
  echo "+ $*" >&2
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >"$dir.log" 2>&1 || { echo "run $name failed, see $dir.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "import json,sys; json.dump({'wall_s': $t1 - $t0, 'cmd': sys.argv[1]}, open(sys.argv[2],'w'))" \
    "$*" "$dir/command.json"
}

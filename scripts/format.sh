#!/usr/bin/env bash
# clang-format over loom's C++ sources (.clang-format at the root).
#   scripts/format.sh           rewrite every tracked source file in place
#   scripts/format.sh --check   change nothing; list the files that differ, exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is missing; run make deps" >&2; exit 2; }
mapfile -t files < <(git ls-files -- 'src/*.h' 'src/*.cpp' 'tests/*.h' 'tests/*.cpp' \
                                     'bench/*.h' 'bench/*.cpp' 'cmake/*.cpp')
if [[ ${1:-} == --check ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]})); then
    printf 'format: %s is not clang-formatted\n' "${bad[@]}" >&2
    echo "format: ${#bad[@]} file(s) differ; run make format" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files clean"
else
  clang-format -i "${files[@]}"
fi

#!/usr/bin/env bash
# clang-tidy (.clang-tidy at the root) over the C++ files changed since a base revision.
#   scripts/lint.sh BUILD [BASE]    BASE defaults to $LINT_BASE, else HEAD~1
# LINT_MAX=N checks at most N units (the others are named as not checked); CI sets it to bound
# its time after a commit that touches many files.
# A changed header is checked through the .cpp of the same name when there is one. libtorch
# units take ~1 min each to parse (clang cannot read gcc's precompiled header), so the check
# covers the change, not the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/lint.sh BUILD [BASE]}
base=${2:-${LINT_BASE:-HEAD~1}}
command -v clang-tidy >/dev/null || { echo "lint: clang-tidy is missing; run make deps" >&2; exit 2; }
[[ -f $build/compile_commands.json ]] || { echo "lint: $build/compile_commands.json is missing; run make build" >&2; exit 2; }
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  echo "lint: no revision '$base' (a clone without history?); nothing to compare with"
  exit 0
fi
mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- 'src/*.h' 'src/*.cpp' \
                                                                    'tests/*.cpp' 'bench/*.cpp')
units=()
for f in "${changed[@]}"; do
  case $f in
    *.cpp) units+=("$f") ;;
    *.h) [[ -f ${f%.h}.cpp ]] && units+=("${f%.h}.cpp") ;;
  esac
done
mapfile -t units < <(printf '%s\n' "${units[@]}" | sort -u | sed '/^$/d')
if ((${#units[@]} == 0)); then
  echo "lint: no C++ unit changed since $base"
  exit 0
fi
# The build's compile commands without gcc's precompiled-header flags, which clang cannot use.
db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
sed -E 's# -Winvalid-pch -include [^ ]*cmake_pch\.hxx##g' "$build/compile_commands.json" \
  >"$db/compile_commands.json"
echo "lint: ${#units[@]} unit(s) changed since $base"
max=${LINT_MAX:-0}
if ((max > 0 && ${#units[@]} > max)); then
  echo "lint: checking the first $max; not checked: ${units[*]:max}"
  units=("${units[@]:0:max}")
fi
status=0
for u in "${units[@]}"; do
  if ! grep -q "\"file\": \"[^\"]*/$u\"" "$db/compile_commands.json"; then
    echo "lint: $u is not built in $build (skipped)"
    continue
  fi
  clang-tidy -p "$db" --quiet "$u" 2>/dev/null || status=1
done
((status == 0)) && echo "lint: clean" || echo "lint: warnings above; fix them (or justify a NOLINT)" >&2
exit $status

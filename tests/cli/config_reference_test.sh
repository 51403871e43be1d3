#!/usr/bin/env bash
# docs/guide/configuration.md must be exactly what `loom train --help-markdown` prints from the
# configuration schema. Usage: config_reference_test.sh LOOM DOC
set -euo pipefail
loom=$1
doc=$2
if ! diff -u "$doc" <("$loom" train --help-markdown); then
  echo "FAIL: $doc differs from \`loom train --help-markdown\` (lines above: - file, + binary);" \
       "regenerate it with \`make docs\` and commit it" >&2
  exit 1
fi
echo "ok: $doc matches the configuration schema"

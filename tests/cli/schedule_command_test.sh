#!/usr/bin/env bash
# loom schedule from the command line: each format, a CSV that reads back to itself, the
# lowered schedule's data-parallel actions, the bubble it prints against 1F1B's formula.
# usage: schedule_command_test.sh LOOM_BINARY
set -uo pipefail
loom=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ascii: one row per rank, and 1F1B's bubble (p - 1) / (m + p - 1) with B = 2F: 3 / 11 at p 4, m 8.
"$loom" schedule --schedule 1f1b --pp 4 --microbatches 8 --format ascii > "$tmp/a" ||
  fail "ascii exited with $?"
[[ $(grep -c '^rank [0-3] |' "$tmp/a") == 4 ]] || { cat "$tmp/a"; fail "not 4 rank rows"; }
grep -q '^bubble fraction (F=1, B=2): 0.272727' "$tmp/a" || { cat "$tmp/a"; fail "1F1B's bubble is not 3/11"; }

# csv written with --out reads back (--file) to the same csv, for a looping and a V schedule.
for s in "bfs --loops 2" "zbv" "dualpipev"; do
  # shellcheck disable=SC2086
  "$loom" schedule --schedule $s --pp 2 --microbatches 4 --format csv --out "$tmp/s.csv" \
    2> "$tmp/err" || { cat "$tmp/err"; fail "$s: csv exited with $?"; }
  grep -q "^wrote $tmp/s.csv" "$tmp/err" || fail "$s: no 'wrote' line"
  "$loom" schedule --file "$tmp/s.csv" --format csv > "$tmp/back.csv" || fail "$s: reading it back failed"
  cmp -s "$tmp/s.csv" "$tmp/back.csv" || { diff "$tmp/s.csv" "$tmp/back.csv"; fail "$s: csv does not read back to itself"; }
done

# Lowered for zero3: each rank gathers its parameters before and reduces its gradients after;
# without data parallelism, only the compute and the pipeline's messages.
"$loom" schedule --schedule 1f1b --pp 2 --microbatches 2 --lower --dp-mode zero3 --format csv > "$tmp/z" ||
  fail "lowered zero3 exited with $?"
for r in 0 1; do
  row=$(grep "^${r}" "$tmp/z")
  [[ $row == "${r}UNSHARD,"* && $row == *",${r}REDUCE_GRAD,${r}RESHARD" ]] ||
    fail "rank $r lowered for zero3: $row"
done
"$loom" schedule --schedule 1f1b --pp 2 --microbatches 2 --lower --dp-mode none --format csv > "$tmp/n" ||
  fail "lowered without dp exited with $?"
grep -q 'UNSHARD\|REDUCE_GRAD' "$tmp/n" && fail "data-parallel actions without data parallelism"
grep -q '^0F0,0SEND_F0,' "$tmp/n" || { cat "$tmp/n"; fail "no SEND after rank 0's first forward"; }

# svg and trace: a whole picture and JSON that parses.
"$loom" schedule --schedule interleaved --pp 2 --loops 2 --microbatches 4 --format svg > "$tmp/p.svg" ||
  fail "svg exited with $?"
head -c 4 "$tmp/p.svg" | grep -q '<svg' && tail -c 8 "$tmp/p.svg" | grep -q '</svg>' || fail "not a whole svg"
"$loom" schedule --schedule zb-h1 --pp 2 --microbatches 4 --format trace > "$tmp/t.json" ||
  fail "trace exited with $?"
python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["traceEvents"]; assert len(e) > 8' "$tmp/t.json" ||
  fail "the trace is not JSON with events"

# Bad input: one line, exit 2.
for bad in "--format png" "--out $tmp/none/s.svg --format svg" "--pp 0"; do
  # shellcheck disable=SC2086
  "$loom" schedule $bad > "$tmp/o" 2>&1
  rc=$?
  [[ $rc == 2 && $(grep -c . "$tmp/o") == 1 ]] || { cat "$tmp/o"; fail "'$bad': exit $rc, not one line and 2"; }
done
echo "ok: loom schedule formats, csv round trip, lowering, bad input"

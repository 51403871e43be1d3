#!/usr/bin/env bash
# loom tokenizer train and data.tokenizer from the command line: the tokenizer is written and
# its bytes per token printed; a run tokenizes the corpus once into tok.model.cache/ and the
# next run reads that file; bad input is one line, exit 2, and leaves no file behind.
# usage: tokenizer_test.sh LOOM_BINARY CONFIG_DIR
set -u
loom=$1
tiny=$2/tiny_gpt.toml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# A corpus of two files, a few hundred kilobytes of English.
mkdir -p "$tmp/corpus"
cat /usr/share/games/fortunes/{computers,science} >"$tmp/corpus/a.txt" 2>/dev/null ||
  for i in $(seq 3000); do echo "the loom weaves line $i of cloth with warp and weft"; done >"$tmp/corpus/a.txt"
head -c 20000 "$tmp/corpus/a.txt" >"$tmp/corpus/b.txt"

# expect_usage NAME EXPECTED_SUBSTRING FILE_THAT_MUST_NOT_EXIST -- ARGS...
expect_usage() {
  local name=$1 want=$2 absent=$3
  shift 4
  "$loom" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ $rc -ne 2 || $(grep -c . "$tmp/stderr") -ne 1 ]] || ! grep -qF -- "$want" "$tmp/stderr"; then
    fail "$name: rc=$rc, expected 2 and one line with '$want':"; cat "$tmp/stderr"; return
  fi
  if [[ -e $absent ]]; then fail "$name: $absent was written"; return; fi
  echo "ok   $name: $(cat "$tmp/stderr")"
}

"$loom" tokenizer train --data "$tmp/corpus" --vocab 512 --out "$tmp/tok.model" >"$tmp/out" 2>&1 ||
  fail "tokenizer train: exit $?"
cat "$tmp/out"
grep -q "^wrote $tmp/tok.model: 512 pieces" "$tmp/out" || fail "no 'wrote ... 512 pieces' line"
grep -Eq "bytes per token$" "$tmp/out" || fail "no bytes per token"
bpt=$(sed -nE 's/.*: ([0-9.]+) bytes per token$/\1/p' "$tmp/out")
awk -v b="$bpt" 'BEGIN { exit !(b > 1.5) }' || fail "bytes per token $bpt, expected > 1.5"

expect_usage vocab_too_small "--vocab" "$tmp/small.model" -- \
  tokenizer train --data "$tmp/corpus" --vocab 20 --out "$tmp/small.model"
expect_usage vocab_too_large "Vocabulary size too high" "$tmp/large.model" -- \
  tokenizer train --data "$tmp/corpus/b.txt" --vocab 60000 --out "$tmp/large.model"
expect_usage no_corpus "not found; give --data" "$tmp/none.model" -- \
  tokenizer train --data "$tmp/nothing" --vocab 512 --out "$tmp/none.model"
# An empty corpus is named as such (SentencePiece's own refusal said nothing), and the fix is
# the flag given, not data.path.
: >"$tmp/empty.txt"
mkdir -p "$tmp/empty-folder"
expect_usage empty_corpus "holds no text; give --data" "$tmp/none.model" -- \
  tokenizer train --data "$tmp/empty.txt" --vocab 512 --out "$tmp/none.model"
expect_usage empty_folder "contains no text files; give --data" "$tmp/none.model" -- \
  tokenizer train --data "$tmp/empty-folder" --vocab 512 --out "$tmp/none.model"
expect_usage no_out_folder "cannot create" "$tmp/no/such/tok.model" -- \
  tokenizer train --data "$tmp/corpus" --vocab 512 --out "$tmp/no/such/tok.model"
expect_usage model_vocab_too_small "has 512 pieces but model.vocab is 256" "$tmp/run0" -- \
  train --config "$tiny" --data.kind text --data.path "$tmp/corpus" --tokenizer "$tmp/tok.model" \
  --output.dir "$tmp/run0"
expect_usage not_a_model "not a SentencePiece model" "$tmp/run0" -- \
  train --config "$tiny" --data.kind text --data.path "$tmp/corpus" --tokenizer "$tiny" \
  --vocab 512 --output.dir "$tmp/run0"

# Two runs: the first tokenizes (one rank does, with a log line), the second only maps.
for run in 1 2; do
  "$loom" train --config "$tiny" --nproc 2 --data.kind text --data.path "$tmp/corpus" \
    --tokenizer "$tmp/tok.model" --vocab 512 --steps 2 --global-batch 4 \
    --output.dir "$tmp/run$run" >"$tmp/run$run.log" 2>&1 || { fail "run $run: exit $?"; cat "$tmp/run$run.log"; }
done
[[ $(grep -c "tokenizing" "$tmp/run1.log") -eq 1 ]] || { fail "run 1 did not tokenize once"; cat "$tmp/run1.log"; }
grep -q "tokenizing" "$tmp/run2.log" && fail "run 2 tokenized again"
ls "$tmp/tok.model.cache/"*.tokens >/dev/null 2>&1 || fail "no token file in tok.model.cache/"
for run in 1 2; do
  grep -q '"eval_bits_per_byte"' "$tmp/run$run/metrics.jsonl" || fail "run $run: no eval_bits_per_byte"
  [[ -s $tmp/run$run/loss.svg ]] || fail "run $run: no loss.svg"
done
# A changed corpus is tokenized again.
echo "one more line" >>"$tmp/corpus/b.txt"
"$loom" train --config "$tiny" --nproc 2 --data.kind text --data.path "$tmp/corpus" \
  --tokenizer "$tmp/tok.model" --vocab 512 --steps 1 --global-batch 4 --output.dir "$tmp/run3" \
  >"$tmp/run3.log" 2>&1 || fail "run 3: exit $?"
grep -q "tokenizing" "$tmp/run3.log" || fail "run 3 did not tokenize the changed corpus"

if ((fails)); then echo "$fails failure(s)"; exit 1; fi
echo "all passed"

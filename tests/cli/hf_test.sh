#!/usr/bin/env bash
# loom export / import against Hugging Face transformers, and text from a trained model
# (docs/models.md):
#  - a Llama trained by loom under tp=2 x pp=2 and a tied GPT under pp=2 x dp=2 (bfs, zero3),
#    exported, loaded by LlamaForCausalLM / GPT2LMHeadModel: the same logits on the same tokens
#    within 1e-4 (fp32);
#  - a LlamaForCausalLM and a GPT2LMHeadModel made by transformers (random weights from a
#    config), imported (also from shards): the same logits; the imports resume training in
#    another layout;
#  - loom -> HF -> loom -> HF: the same bytes.
# usage: hf_test.sh LOOM SOURCE_DIR
set -uo pipefail
loom=$1
src=$2
py=${LOOM_VENV:-$HOME/.local/share/loom/venv}/bin/python
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"
compare=(-W ignore "$src/tests/cli/hf_compare.py")
tokens="72 101 108 108 111 44 32 119 111 114 108 100"
prompt="Hello, world"
# transformers' side runs in two Python processes (its import takes seconds): the models it
# makes, first; the logits it compares, queued here as the loom side runs, at the end.
"$py" "${compare[@]}" >"$tmp/made" 2>"$tmp/stderr" <<JOBS
llama from transformers | make llama $tmp/llama/from-hf
gpt from transformers | make gpt2 $tmp/gpt/from-hf
llama in shards from transformers | make llama $tmp/sharded/hf 40KB
JOBS
while read -r verdict line; do
  if [[ $verdict == ok ]]; then ok "$line"; else fail "$line"; fi
done <"$tmp/made"
[[ $(grep -c . "$tmp/made") -eq 3 ]] || fail "transformers made $(grep -c . "$tmp/made") of 3 models"
# compare_logits LABEL HF_DIR LOOM_LOGITS: queued for the end.
compare_logits() { echo "$1 | logits $2 $3 $tokens" >>"$tmp/logit-jobs"; }

model=(--model.kind llama --vocab 256 --seq-len 32 --width 48 --heads 4 --kv-heads 2 --layers 2
       --data.kind synthetic --global-batch 8 --microbatches 2 --steps 3 --eval-batches 1
       --progress false --overwrite)
if "$loom" train "${model[@]}" --nproc 4 --tp 2 --pp 2 --sample-every 3 --output.dir "$tmp/run" \
     >"$tmp/stdout" 2>"$tmp/stderr" && grep -aq "sample at step 3: The " "$tmp/stderr"; then
  ok "--sample-every under tp=2 x pp=2 (the message on stderr, above the progress bar)"
else
  fail "sample every"
fi
if "$loom" generate --checkpoint "$tmp/run/checkpoint" --prompt "$prompt" --max-tokens 8 --seed 3 \
     >"$tmp/stdout" 2>"$tmp/stderr" && grep -aq "^$prompt" "$tmp/stdout"; then
  ok "loom generate continues the prompt"
else
  fail generate
fi
# Export of a trained model, import of the one transformers made, training on from the import,
# and the round trip. $1: llama | gpt; $2: the run; then the model and layout flags the import
# resumes with.
interop_checks() {
  local kind=$1 run=$2 d=$tmp/$1
  shift 2
  mkdir -p "$d"
  if "$loom" export --checkpoint "$run/checkpoint" --out "$d/hf" >"$tmp/stdout" 2>"$tmp/stderr" &&
     "$loom" generate --checkpoint "$run/checkpoint" --prompt "$prompt" --max-tokens 1 \
       --dump-logits "$d/loom.safetensors" >"$tmp/stdout" 2>"$tmp/stderr"; then
    compare_logits "$kind export" "$d/hf" "$d/loom.safetensors"
  else
    fail "$kind export"
  fi
  if "$loom" import --from "$d/from-hf" --out "$d/imported" >"$tmp/stdout" 2>"$tmp/stderr" &&
     "$loom" generate --checkpoint "$d/imported" --prompt "$prompt" --max-tokens 1 \
       --dump-logits "$d/imported.safetensors" >"$tmp/stdout" 2>"$tmp/stderr"; then
    compare_logits "$kind import" "$d/from-hf" "$d/imported.safetensors"
  else
    fail "$kind import"
  fi
  if "$loom" train --model.kind "$kind" --vocab 256 --seq-len 32 --width 48 --heads 4 --layers 2 \
       "$@" --data.kind synthetic --global-batch 8 --microbatches 2 --steps 2 --eval-batches 1 \
       --progress false --overwrite --nproc 4 --resume "$d/imported" --output.dir "$d/finetune" \
       >"$tmp/stdout" 2>"$tmp/stderr"; then
    ok "the $kind import resumes under $*"
  else
    cat "$tmp/stderr"; fail "$kind import resume"
  fi
  # Round trip: loom -> HF -> loom -> HF gives the same file.
  if "$loom" import --from "$d/hf" --out "$d/again" >"$tmp/stdout" 2>"$tmp/stderr" &&
     "$loom" export --checkpoint "$d/again" --out "$d/hf2" >"$tmp/stdout" 2>"$tmp/stderr" &&
     cmp -s "$d/hf/model.safetensors" "$d/hf2/model.safetensors"; then
    ok "$kind round trip loom -> HF -> loom -> HF: model.safetensors identical"
  else
    fail "$kind round trip"
  fi
}

interop_checks llama "$tmp/run" --kv-heads 2 --ffn-width 96 --pp 2
# A model saved in shards (model.safetensors.index.json, as transformers saves one above 5 GB).
d=$tmp/sharded
if [[ -f $d/hf/model.safetensors.index.json && ! -e $d/hf/model.safetensors ]] &&
   "$loom" import --from "$d/hf" --out "$d/imported" >"$tmp/stdout" 2>"$tmp/stderr" &&
   "$loom" generate --checkpoint "$d/imported" --prompt "$prompt" --max-tokens 1 \
     --dump-logits "$d/imported.safetensors" >"$tmp/stdout" 2>"$tmp/stderr"; then
  compare_logits "llama import from $(ls "$d/hf" | grep -c 'safetensors$') shards" "$d/hf" \
    "$d/imported.safetensors"
else
  fail "sharded llama import"
fi
# transformers' GPT-2 ties its head to the token embedding; on a pipeline loom's last stage
# multiplies by a copy of it (docs/models.md).
gpt=(--model.kind gpt --vocab 256 --seq-len 32 --width 48 --heads 4 --layers 2 --data.kind synthetic
     --global-batch 8 --microbatches 2 --steps 3 --eval-batches 1 --progress false --overwrite)
if "$loom" train "${gpt[@]}" --tie-embeddings --nproc 4 --pp 2 --schedule bfs --loops 2 \
     --dp-mode zero3 --output.dir "$tmp/gpt-run" >"$tmp/stdout" 2>"$tmp/stderr"; then
  ok "a tied GPT trains under pp=2 x dp=2, bfs, zero3"
else
  cat "$tmp/stderr"; fail "gpt train"
fi
interop_checks gpt "$tmp/gpt-run" --tie-embeddings --pp 2 --schedule zb-h1 --dp-mode zero3

# A GPT with a head bias has no GPT-2 form: one line, exit 2, nothing written.
"$loom" train "${gpt[@]}" --steps 1 --model.head_bias true --output.dir "$tmp/biased" >/dev/null 2>&1
"$loom" export --checkpoint "$tmp/biased/checkpoint" --out "$tmp/biased-hf" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 && ! -e "$tmp/biased-hf" ]] &&
   grep -q "head_bias" "$tmp/stderr"; then
  ok "export of a GPT with a head bias: $(cat "$tmp/stderr")"
else
  cat "$tmp/stderr"; fail "biased head export (rc=$rc)"
fi

# Bad input: one line, exit 2.
"$loom" export --checkpoint "$tmp/nothing" --out "$tmp/x" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]]; then ok "export of a missing checkpoint: $(cat "$tmp/stderr")"; else fail "missing checkpoint (rc=$rc)"; fi
"$loom" generate --checkpoint "$tmp/run/checkpoint" --prompt "$prompt" --max-tokens 1 \
  --dump-logits "$tmp/no-such-folder/logits.safetensors" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]] && grep -q -- "--dump-logits" "$tmp/stderr"; then
  ok "--dump-logits into a missing folder: $(cat "$tmp/stderr")"
else
  cat "$tmp/stderr"; fail "dump-logits into a missing folder (rc=$rc)"
fi

# refused NAME WANT -- ARGS: exit 2, one line containing WANT, and nothing written.
refused() {
  local name=$1 want=$2
  shift 3
  "$loom" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]] && grep -qF -- "$want" "$tmp/stderr" &&
     [[ ! -e "$tmp/refused-out" ]]; then
    ok "$name: $(cat "$tmp/stderr")"
  else
    cat "$tmp/stderr"; fail "$name (rc=$rc)"
  fi
}
echo "not a tokenizer" >"$tmp/not-a-tokenizer"
refused "export with a file that is no tokenizer" "is not a SentencePiece model" -- export \
  --checkpoint "$tmp/run/checkpoint" --out "$tmp/refused-out" --tokenizer "$tmp/not-a-tokenizer"
refused "generate at an infinite temperature" "--temperature must be a finite number" -- \
  generate --checkpoint "$tmp/run/checkpoint" --prompt "$prompt" --temperature inf

# transformers' verdicts on the queued logits: one line each.
"$py" "${compare[@]}" <"$tmp/logit-jobs" >"$tmp/compared" 2>"$tmp/stderr"
while read -r verdict line; do
  if [[ $verdict == ok ]]; then ok "$line"; else fail "$line"; fi
done <"$tmp/compared"
queued=$(grep -c . "$tmp/logit-jobs")
[[ $(grep -c . "$tmp/compared") -eq $queued ]] ||
  fail "transformers answered $(grep -c . "$tmp/compared") of $queued logit comparisons"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

#!/usr/bin/env bash
# loom export / import against Hugging Face transformers, and text from a trained model
# (docs/models.md):
#  - a Llama trained by loom under tp=2 x pp=2, exported, loaded by LlamaForCausalLM: the same
#    logits on the same tokens within 1e-4 (fp32);
#  - a LlamaForCausalLM made by transformers (random weights from a config), imported: the same
#    logits; the import resumes training in another layout;
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
if "$loom" export --checkpoint "$tmp/run/checkpoint" --out "$tmp/hf" >"$tmp/stdout" 2>"$tmp/stderr" &&
   "$loom" generate --checkpoint "$tmp/run/checkpoint" --prompt "$prompt" --max-tokens 1 \
     --dump-logits "$tmp/loom.safetensors" >"$tmp/stdout" 2>"$tmp/stderr" &&
   "$py" "${compare[@]}" logits "$tmp/hf" "$tmp/loom.safetensors" $tokens >"$tmp/out" 2>"$tmp/stderr"; then
  ok "export: $(cat "$tmp/out")"
else
  cat "$tmp/out" 2>/dev/null; fail export
fi

if "$py" "${compare[@]}" make "$tmp/from-hf" >"$tmp/out" 2>"$tmp/stderr" &&
   "$loom" import --from "$tmp/from-hf" --out "$tmp/imported" >"$tmp/stdout" 2>"$tmp/stderr" &&
   "$loom" generate --checkpoint "$tmp/imported" --prompt "$prompt" --max-tokens 1 \
     --dump-logits "$tmp/imported.safetensors" >"$tmp/stdout" 2>"$tmp/stderr" &&
   "$py" "${compare[@]}" logits "$tmp/from-hf" "$tmp/imported.safetensors" $tokens >"$tmp/out" 2>"$tmp/stderr"; then
  ok "import: $(cat "$tmp/out")"
else
  cat "$tmp/out" 2>/dev/null; fail import
fi

# The imported model trains on (pp=2, dp=2) from its weights.
if "$loom" train --model.kind llama --vocab 256 --seq-len 32 --width 48 --heads 4 --kv-heads 2 \
     --ffn-width 96 --layers 2 --data.kind synthetic --global-batch 8 --microbatches 2 --steps 2 \
     --eval-batches 1 --progress false --overwrite --nproc 4 --pp 2 --resume "$tmp/imported" \
     --output.dir "$tmp/finetune" >"$tmp/stdout" 2>"$tmp/stderr"; then
  ok "the import resumes under pp=2 x dp=2"
else
  fail "import resume"
fi

# Round trip: loom -> HF -> loom -> HF gives the same file.
if "$loom" import --from "$tmp/hf" --out "$tmp/again" >"$tmp/stdout" 2>"$tmp/stderr" &&
   "$loom" export --checkpoint "$tmp/again" --out "$tmp/hf2" >"$tmp/stdout" 2>"$tmp/stderr" &&
   cmp -s "$tmp/hf/model.safetensors" "$tmp/hf2/model.safetensors"; then
  ok "round trip loom -> HF -> loom -> HF: model.safetensors identical"
else
  fail "round trip"
fi

# Bad input: one line, exit 2.
"$loom" export --checkpoint "$tmp/nothing" --out "$tmp/x" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]]; then ok "export of a missing checkpoint: $(cat "$tmp/stderr")"; else fail "missing checkpoint (rc=$rc)"; fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

# The Hugging Face side of tests/cli/hf_test.sh (PyPI transformers and safetensors), one
# process for many jobs (transformers takes seconds to import). Jobs on standard input, one
# per line, each answered by one line on standard output, "ok   LABEL: ..." or "FAIL LABEL: ...":
#   LABEL | logits HF_DIR LOOM_LOGITS TOKENS...  the folder's model's logits of TOKENS
#                                                (AutoModelForCausalLM: LlamaForCausalLM,
#                                                GPT2LMHeadModel) against loom's (generate
#                                                --dump-logits), fp32, within 1e-4
#   LABEL | make llama|gpt2 HF_DIR [SHARD]       a random model of that class from a config (no
#                                                download), saved as safetensors (in shards of at
#                                                most SHARD, e.g. "40KB")
import sys
import traceback

import torch
from safetensors.torch import load_file
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM)


def make(family, hf_dir, shard=None):
    torch.manual_seed(0)
    if family == "llama":
        config = LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=96,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=10000.0,
                             tie_word_embeddings=False)
        model = LlamaForCausalLM(config)
    else:  # GPT-2 as transformers makes it by default (tied head), with loom's exact GELU
        config = GPT2Config(vocab_size=256, n_positions=32, n_embd=48, n_layer=2, n_head=4,
                            activation_function="gelu")
        model = GPT2LMHeadModel(config)
    model.save_pretrained(hf_dir, safe_serialization=True,
                          **({"max_shard_size": shard} if shard else {}))
    return True, f"a random {type(model).__name__} in {hf_dir}"


def logits(hf_dir, loom_logits, *tokens):
    tokens = [int(t) for t in tokens]
    model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        theirs = model(torch.tensor([tokens])).logits[0]
    ours = load_file(loom_logits)["logits"]
    worst = (theirs - ours).abs().max().item()
    return worst <= 1e-4, (f"{type(model).__name__}: logits of {len(tokens)} tokens x "
                           f"{theirs.shape[-1]}: max |loom - transformers| = {worst:.3g} "
                           "(tolerance 1e-4)")


for line in sys.stdin:
    if not line.strip():
        continue
    label, _, job = line.partition("|")
    words = job.split()
    try:
        passed, said = {"make": make, "logits": logits}[words[0]](*words[1:])
    except Exception:  # the job fails, the others still run
        passed, said = False, traceback.format_exc().strip().splitlines()[-1]
    print(f"{'ok  ' if passed else 'FAIL'} {label.strip()}: {said}", flush=True)

# The Hugging Face side of tests/cli/hf_test.sh (PyPI transformers and safetensors).
#   hf_compare.py logits HF_DIR LOOM_LOGITS TOKENS...  the folder's model's logits of TOKENS
#                                                      (AutoModelForCausalLM: LlamaForCausalLM,
#                                                      GPT2LMHeadModel) against loom's
#                                                      (generate --dump-logits), fp32
#   hf_compare.py make llama|gpt2 HF_DIR [SHARD]       a random model of that class from a
#                                                      config (no download), saved as safetensors
#                                                      (in shards of at most SHARD, e.g. "40KB")
import sys

import torch
from safetensors.torch import load_file
from transformers import (AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                          LlamaForCausalLM)

if sys.argv[1] == "make":
    torch.manual_seed(0)
    if sys.argv[2] == "llama":
        config = LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=96,
                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=32, rms_norm_eps=1e-5, rope_theta=10000.0,
                             tie_word_embeddings=False)
        model = LlamaForCausalLM(config)
    else:  # GPT-2 as transformers makes it by default (tied head), with loom's exact GELU
        config = GPT2Config(vocab_size=256, n_positions=32, n_embd=48, n_layer=2, n_head=4,
                            activation_function="gelu")
        model = GPT2LMHeadModel(config)
    shard = {"max_shard_size": sys.argv[4]} if len(sys.argv) > 4 else {}
    model.save_pretrained(sys.argv[3], safe_serialization=True, **shard)
    sys.exit(0)

hf_dir, loom_logits, tokens = sys.argv[2], sys.argv[3], [int(t) for t in sys.argv[4:]]
model = AutoModelForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32,
                                             attn_implementation="eager")
model.eval()
with torch.no_grad():
    theirs = model(torch.tensor([tokens])).logits[0]
ours = load_file(loom_logits)["logits"]
worst = (theirs - ours).abs().max().item()
print(f"{type(model).__name__}: logits of {len(tokens)} tokens x {theirs.shape[-1]}: "
      f"max |loom - transformers| = {worst:.3g} (tolerance 1e-4)")
sys.exit(0 if worst <= 1e-4 else 1)

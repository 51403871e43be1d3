# The Hugging Face side of tests/cli/hf_test.sh (PyPI transformers and safetensors).
#   hf_compare.py logits HF_DIR LOOM_LOGITS TOKENS...  LlamaForCausalLM's logits of TOKENS against
#                                                      loom's (generate --dump-logits), fp32
#   hf_compare.py make HF_DIR                          a random LlamaForCausalLM from a config
#                                                      (no download), saved as safetensors
import sys

import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM

if sys.argv[1] == "make":
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(sys.argv[2], safe_serialization=True)
    sys.exit(0)

hf_dir, loom_logits, tokens = sys.argv[2], sys.argv[3], [int(t) for t in sys.argv[4:]]
model = LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32, attn_implementation="eager")
model.eval()
with torch.no_grad():
    theirs = model(torch.tensor([tokens])).logits[0]
ours = load_file(loom_logits)["logits"]
worst = (theirs - ours).abs().max().item()
print(f"logits of {len(tokens)} tokens x {theirs.shape[-1]}: max |loom - transformers| = {worst:.3g} "
      f"(tolerance 1e-4)")
sys.exit(0 if worst <= 1e-4 else 1)

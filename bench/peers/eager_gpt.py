"""The single-GPU peer of bench/gpu_check.sh: a plain PyTorch eager training loop of loom's GPT
(the blocks of src/loom/model/gpt.cpp with model.attention = flash: pre-LayerNorm, fused QKV,
scaled_dot_product_attention(is_causal=True), GELU MLP of 4x width, untied head), in bf16 the
way PyTorch users train: torch.autocast(bfloat16) over fp32 parameters, fused AdamW.

    python bench/peers/eager_gpt.py --width 1024 --layers 12 --seq-len 1024 --micro-batch 8

Prints one line: tokens/s over --steps steps after --warmup steps (mean step time).
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        h = x + self.proj(y)
        return h + self.out(F.gelu(self.fc(self.ln2(h))))


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, width, layers, heads):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(seq_len, width)
        self.layers = nn.Sequential(*[Layer(width, heads) for _ in range(layers)])
        self.lnf = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.lnf(self.layers(x)))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--micro-batch", type=int, default=8)
    p.add_argument("--microbatches", type=int, default=1, help="per step (gradient accumulation)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()

    dev = torch.device(a.device)
    torch.manual_seed(1234)
    model = GPT(a.vocab, a.seq_len, a.width, a.layers, a.heads).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=dev.type == "cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        for _ in range(a.microbatches):
            idx = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len + 1), device=dev, generator=gen)
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), idx[:, 1:].reshape(-1))
            (loss / a.microbatches).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        loss.item()  # the step's end on the host, as loom's step ends with its loss
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    step_s = sum(times) / len(times)
    tokens = a.micro_batch * a.microbatches * a.seq_len
    params = sum(p.numel() for p in model.parameters())
    print(f"eager: {tokens / step_s:.0f} tokens/s, {step_s * 1e3:.1f} ms/step, {params} parameters")


if __name__ == "__main__":
    main()

"""loom's byte-level GPT in plain PyTorch (the blocks of src/loom/model/gpt.cpp: pre-LayerNorm,
fused QKV, causal attention, GELU MLP of 4x width, untied head), shared by the peers:
attention "standard" (explicit softmax with an additive mask, loom's model.attention =
standard) or "flash" (scaled_dot_product_attention, model.attention = flash)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Layer(nn.Module):
    def __init__(self, width, heads, seq_len, attention="standard"):
        super().__init__()
        self.heads = heads
        self.flash = attention == "flash"
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)
        if not self.flash:
            causal = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), 1)
            self.register_buffer("mask", torch.zeros(seq_len, seq_len).masked_fill(causal, -math.inf))

    def forward(self, x):
        b, t, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(hd) + self.mask[:t, :t]
            y = scores.softmax(-1) @ v
        h = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return h + self.out(F.gelu(self.fc(self.ln2(h))))


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, width, layers, heads, attention="standard"):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(seq_len, width)
        self.layers = nn.Sequential(*[Layer(width, heads, seq_len, attention) for _ in range(layers)])
        self.lnf = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.lnf(self.layers(x)))

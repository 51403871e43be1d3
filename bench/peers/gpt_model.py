"""loom's byte-level GPT in plain PyTorch (the blocks of src/loom/model/gpt.cpp: token + learned
position embedding, pre-LayerNorm layers with fused QKV, causal attention and a GELU MLP of 4x
width, then a final LayerNorm and an untied head without bias, GPT-2's, loom's
model.head_bias = false), shared by the peers: attention "standard" (explicit softmax with an
additive mask, loom's model.attention = standard) or "flash" (scaled_dot_product_attention,
model.attention = flash).

GPT.blocks is loom's block list (embedding, layers..., head), so that the pipeline peers cut the
model into stages where loom's partitioner does (stage_module)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Embedding(nn.Module):
    def __init__(self, vocab, seq_len, width):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(seq_len, width)

    def forward(self, idx):
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


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


class Head(nn.Module):
    def __init__(self, width, vocab):
        super().__init__()
        self.lnf = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, x):
        return self.head(self.lnf(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq_len, width, layers, heads, attention="standard"):
        super().__init__()
        self.blocks = nn.Sequential(
            Embedding(vocab, seq_len, width),
            *[Layer(width, heads, seq_len, attention) for _ in range(layers)],
            Head(width, vocab))

    def forward(self, idx):
        return self.blocks(idx)


def stage_bounds(layers, stages):
    """Block ranges [lo, hi) of `stages` pipeline stages over loom's 1 + layers + 1 blocks: the
    layers spread evenly (earlier stages take the remainder), the embedding joins the first
    stage and the head the last, as loom's flops partition cuts this GPT (the embedding has no
    matrix product, the head's is a few percent of a layer's)."""
    assert layers >= stages, f"{layers} layers cannot fill {stages} stages"
    bounds, lo = [], 0
    for s in range(stages):
        n = layers // stages + (s < layers % stages)
        hi = lo + n + (s == 0) + (s == stages - 1)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def stage_module(model, layers, stages, s):
    """Stage s of `stages`: an nn.Sequential of model's blocks (shares their parameters)."""
    lo, hi = stage_bounds(layers, stages)[s]
    return nn.Sequential(*model.blocks[lo:hi])

"""The peer loom is compared with: PyTorch DistributedDataParallel training loom's byte-level
GPT (same blocks as src/loom/model/gpt.cpp: pre-LayerNorm, fused QKV, causal softmax
attention, GELU MLP of 4x width, tied to nothing) on CPU tensors, one thread per rank.

Run under torchrun, which sets RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT:
    torchrun --nproc-per-node 2 bench/peers/ddp_gpt.py --backend gloo
Prints one line: tokens/s over --steps steps after --warmup steps (mean step time), as loom's
metrics are read by bench/ddp_compare.sh.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from gpt_model import GPT


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gloo", choices=["gloo", "mpi"])
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=16, help="samples per rank and step")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    model = GPT(a.vocab, a.seq_len, a.width, a.layers, a.heads)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-4)
    gen = torch.Generator().manual_seed(rank)
    times = []
    for step in range(a.warmup + a.steps):
        idx = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len + 1), generator=gen)
        t0 = time.perf_counter()
        logits = ddp(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), idx[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    mean = sum(times[a.warmup:]) / a.steps
    if rank == 0:
        tokens = a.micro_batch * a.seq_len * world
        print(f"ddp world={world} backend={a.backend} step_s={mean:.4f} tokens/s={tokens / mean:.1f}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

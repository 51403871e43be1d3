"""The peer loom's dp_mode = allreduce is compared with: PyTorch DistributedDataParallel training
loom's byte-level GPT (gpt_model.py) on CPU tensors, one thread per rank, AdamW.

Run under torchrun, which sets RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT:
    torchrun --nproc-per-node 2 bench/peers/ddp_gpt.py --backend gloo
Prints one line (common.report): tokens/s and every rank's peak RSS.
"""
import torch
import torch.nn as nn

import common
from gpt_model import GPT


def main():
    a = common.parser(__doc__).parse_args()
    rank, world = common.init(a.backend)
    torch.manual_seed(1234)
    model = GPT(a.vocab, a.seq_len, a.width, a.layers, a.heads)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = common.adamw(ddp.parameters(), a)
    gen = torch.Generator().manual_seed(rank)

    def step():
        x, y = common.batch(a, gen)
        opt.zero_grad(set_to_none=True)
        for xm, ym in zip(x.chunk(a.microbatches), y.chunk(a.microbatches)):
            (common.loss_fn(ddp(xm), ym) / a.microbatches).backward()
        opt.step()

    common.report("ddp", a, world, common.median_step_s(a, step), backend=a.backend)


if __name__ == "__main__":
    main()

"""The peer of loom's dp_mode = zero3 / zero2: PyTorch FSDP2 (torch.distributed.fsdp.fully_shard)
on loom's byte-level GPT (gpt_model.py), one fully_shard per block (embedding, layers, head) and
one at the root, over a 1-D CPU DeviceMesh of the world (gloo); --zero 3 reshards the parameters
after the forward, --zero 2 keeps them gathered until the backward (reshard_after_forward=False).

    torchrun --nproc-per-node 2 bench/peers/fsdp_gpt.py --zero 3
Prints one line (common.report): tokens/s and every rank's peak RSS.
"""
import torch
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import common
from gpt_model import GPT


def shard(model, mesh, zero):
    """fully_shard per block and at the root; zero 2 keeps parameters gathered after forward."""
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=zero == 3)
    return fully_shard(model, mesh=mesh, reshard_after_forward=zero == 3)


def main():
    p = common.parser(__doc__)
    p.add_argument("--zero", type=int, default=3, choices=[2, 3])
    a = p.parse_args()
    rank, world = common.init(a.backend)
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(1234)
    model = shard(GPT(a.vocab, a.seq_len, a.width, a.layers, a.heads), mesh, a.zero)
    opt = common.adamw(model.parameters(), a)
    gen = torch.Generator().manual_seed(rank)

    def step():
        x, y = common.batch(a, gen)
        opt.zero_grad(set_to_none=True)
        for k, (xm, ym) in enumerate(zip(x.chunk(a.microbatches), y.chunk(a.microbatches))):
            model.set_requires_gradient_sync(k == a.microbatches - 1)
            (common.loss_fn(model(xm), ym) / a.microbatches).backward()
        opt.step()

    common.report("fsdp2", a, world, common.median_step_s(a, step), zero=a.zero)


if __name__ == "__main__":
    main()

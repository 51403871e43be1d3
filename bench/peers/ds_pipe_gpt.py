"""The peer of loom's 1f1b pipeline from DeepSpeed: its PipelineEngine (a 1F1B schedule, the
micro-batches run as gradient accumulation steps) on CPU (DS_ACCELERATOR=cpu, gloo), training
loom's byte-level GPT (gpt_model.py) as a PipelineModule of loom's blocks cut where loom cuts
them (gpt_model.stage_bounds), pp = world, AdamW (torch's, handed to deepspeed.initialize).

    DS_ACCELERATOR=cpu torchrun --nproc-per-node 2 bench/peers/ds_pipe_gpt.py --microbatches 8 --micro-batch 4
Prints one line (common.report): tokens/s and every rank's peak RSS.
"""
import os

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from deepspeed.pipe import PipelineModule  # noqa: E402

import common  # noqa: E402
from gpt_model import GPT, stage_bounds  # noqa: E402


def main():
    a = common.parser(__doc__).parse_args()
    torch.set_num_threads(1)
    deepspeed.init_distributed(dist_backend=a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    gpt = GPT(a.vocab, a.seq_len, a.width, a.layers, a.heads)
    # "type:Layer" balances the transformer layers over the stages, the embedding with the
    # first and the head with the last: loom's cut (checked against stage_bounds below).
    model = PipelineModule(layers=list(gpt.blocks), num_stages=world, loss_fn=common.loss_fn,
                           partition_method="type:Layer")
    assert [(lo, hi) for lo, hi in zip(model.parts, model.parts[1:])] == \
        stage_bounds(a.layers, world), f"DeepSpeed cut the blocks at {model.parts}"
    opt = common.adamw(model.parameters(), a)
    config = {
        "train_batch_size": a.micro_batch * a.microbatches,
        "train_micro_batch_size_per_gpu": a.micro_batch,
        "gradient_accumulation_steps": a.microbatches,
        "steps_per_print": 10 ** 9,
        "wall_clock_breakdown": False,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    gen = torch.Generator().manual_seed(0)  # every stage draws the same batch

    def micro_batches():
        x, y = common.batch(a, gen)
        return iter(zip(x.chunk(a.microbatches), y.chunk(a.microbatches)))

    common.report("deepspeed-pipe", a, 1, common.median_step_s(
        a, lambda: engine.train_batch(data_iter=micro_batches())), pp=world,
        microbatches=a.microbatches)


if __name__ == "__main__":
    main()

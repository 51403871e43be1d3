"""The peers of loom's pipeline schedules: torch.distributed.pipelining on gloo, training loom's
byte-level GPT (gpt_model.py) cut by hand into PipelineStages where loom cuts it
(gpt_model.stage_bounds), pp = world / dp ranks, each holding --stages-per-rank stages: looped
placement (rank r holds stages r, r + pp, ...) for the schedules loom calls gpipe, 1f1b,
interleaved, bfs and zb-h1, V placement (rank r holds r and 2 pp - 1 - r) for ZBV and DualPipeV.
With --dp > 1 the ranks form a 2-D (pp, dp) DeviceMesh and every stage is sharded with FSDP2
over its dp group (--zero 3 or 2), as loom's --dp_mode zero3 / zero2 with pp x dp.

    torchrun --nproc-per-node 2 bench/peers/pp_gpt.py --schedule bfs --microbatches 8 --micro-batch 4
Prints one line (common.report): tokens/s and every rank's peak RSS.
"""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, schedules as S
from torch.distributed.pipelining.stage import _PipelineStageBase

import common
from gpt_model import GPT, stage_module

SCHEDULES = {  # --schedule: (class, stages per rank by default, V placement)
    "gpipe": (S.ScheduleGPipe, 1, False),
    "1f1b": (S.Schedule1F1B, 1, False),
    "interleaved": (S.ScheduleInterleaved1F1B, 2, False),
    "bfs": (S.ScheduleLoopedBFS, 2, False),
    "zb": (S.ScheduleInterleavedZeroBubble, 2, False),
    "zbv": (S.ScheduleZBVZeroBubble, 2, True),
    "dualpipev": (S.ScheduleDualPipeV, 2, True),
}


def local_stage_ids(pp_rank, pp, per_rank, v_shape):
    if v_shape:
        assert per_rank == 2, "V placement holds two stages per rank"
        return [pp_rank, 2 * pp - 1 - pp_rank]
    return [pp_rank + k * pp for k in range(per_rank)]


def skip_self_p2p():
    """The workaround the V schedules need on gloo: PipelineStage's first step exchanges a dummy
    tensor with the neighbouring stages' ranks (_get_init_p2p_neighbors_ops), and under V
    placement stages pp - 1 and pp are on the same rank, a send to itself, which gloo's TCP
    transport has no pair for ("Pair is not connected ... <--> [none]", pytorch/gloo#344).
    The schedules move tensors between a rank's own stages without communication, so those
    ops are dropped."""
    init_ops = _PipelineStageBase._get_init_p2p_neighbors_ops
    _PipelineStageBase._get_init_p2p_neighbors_ops = lambda stage: [
        op for op in init_ops(stage) if op.group_peer != stage.group_rank]


def main():
    p = common.parser(__doc__)
    p.add_argument("--schedule", default="1f1b", choices=sorted(SCHEDULES))
    p.add_argument("--stages-per-rank", type=int, default=0, help="0: the schedule's default")
    p.add_argument("--dp", type=int, default=1, help="replicas, each stage sharded by FSDP2")
    p.add_argument("--zero", type=int, default=3, choices=[2, 3])
    p.add_argument("--no-workaround", action="store_true",
                   help="V schedules: without skip_self_p2p (fails on gloo)")
    a = p.parse_args()
    cls, per_rank, v_shape = SCHEDULES[a.schedule]
    workaround = v_shape and not a.no_workaround
    if workaround:
        skip_self_p2p()
    per_rank = a.stages_per_rank or per_rank
    rank, world = common.init(a.backend)
    pp = world // a.dp
    pp_group, dp_mesh = None, None
    if a.dp > 1:
        mesh = init_device_mesh("cpu", (pp, a.dp), mesh_dim_names=("pp", "dp"))
        pp_group, dp_mesh = mesh["pp"].get_group(), mesh["dp"]
    pp_rank, dp_rank = rank // a.dp, rank % a.dp
    n_stages = pp * per_rank

    torch.manual_seed(1234)
    model = GPT(a.vocab, a.seq_len, a.width, a.layers, a.heads)
    stages, params = [], []
    for s in local_stage_ids(pp_rank, pp, per_rank, v_shape):
        mod = stage_module(model, a.layers, n_stages, s)
        if dp_mesh is not None:
            for block in mod:
                fully_shard(block, mesh=dp_mesh, reshard_after_forward=a.zero == 3)
            fully_shard(mod, mesh=dp_mesh, reshard_after_forward=a.zero == 3)
        params += list(mod.parameters())
        stages.append(PipelineStage(mod, s, n_stages, torch.device("cpu"), group=pp_group))
    del model  # the other ranks' blocks
    multi = issubclass(cls, S.PipelineScheduleMulti)  # takes a list of stages
    sched = cls(stages if multi else stages[0], n_microbatches=a.microbatches,
                loss_fn=common.loss_fn)
    has_first = any(st.is_first for st in stages)
    has_last = any(st.is_last for st in stages)
    opt = common.adamw(params, a)
    gen = torch.Generator().manual_seed(dp_rank)  # the ranks of one pipeline draw the same batch

    def step():
        x, y = common.batch(a, gen)
        opt.zero_grad(set_to_none=True)
        sched.step(*([x] if has_first else []), target=y if has_last else None)
        opt.step()

    common.report(f"pp-{a.schedule}", a, a.dp, common.median_step_s(a, step), pp=pp, dp=a.dp,
                  stages_per_rank=per_rank, microbatches=a.microbatches,
                  **({"workaround": "skip_self_p2p"} if workaround else {}))


if __name__ == "__main__":
    main()

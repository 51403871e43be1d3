"""What every CPU peer of loom shares: the GPT's shape flags, one compute thread per rank, the
synthetic data (random bytes), the timing (median step time over --steps steps after --warmup
steps, as bench/peers_compare.sh reads loom's metrics) and the report line, which carries the peak
memory of every rank: its maximum resident set size (getrusage's ru_maxrss), the measure
bench/peers/maxrss.py takes of loom's ranks."""
import argparse
import resource
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def parser(doc):
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--backend", default="gloo", choices=["gloo", "mpi"])
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=16, help="samples per micro-batch")
    p.add_argument("--microbatches", type=int, default=1, help="micro-batches per replica and step")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=3e-4)
    return p


def init(backend):
    """One compute thread, the process group of torchrun's environment: (rank, world)."""
    torch.set_num_threads(1)
    dist.init_process_group(backend)
    return dist.get_rank(), dist.get_world_size()


def batch(a, gen):
    """One replica's samples of a step: (inputs, targets) of random bytes, shifted by one."""
    idx = torch.randint(0, a.vocab, (a.micro_batch * a.microbatches, a.seq_len + 1), generator=gen)
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def adamw(params, a):
    """loom's AdamW: lr --lr, betas (0.9, 0.999), eps 1e-8, no weight decay (its defaults)."""
    return torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)


def median_step_s(a, step):
    """Runs step() warmup + steps times; the median wall time of the last `steps` (a burst of
    load on the shared machine moves a mean, hardly a median)."""
    times = []
    for _ in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[a.warmup:])


def max_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def report(name, a, replicas, step_s, **extra):
    """Rank 0 prints one line: tokens/s of the whole job and every rank's peak RSS (MiB)."""
    rss = [None] * dist.get_world_size()
    dist.all_gather_object(rss, max_rss_mib())
    if dist.get_rank() == 0:
        tokens = a.micro_batch * a.microbatches * a.seq_len * replicas
        fields = " ".join(f"{k}={v}" for k, v in extra.items())
        print(f"{name} world={dist.get_world_size()} {fields} step_s={step_s:.4f} "
              f"tokens/s={tokens / step_s:.1f} peak_rss_mib={max(rss):.0f} "
              f"rss_mib_per_rank={','.join(f'{r:.0f}' for r in rss)}", flush=True)
    dist.barrier()
    dist.destroy_process_group()

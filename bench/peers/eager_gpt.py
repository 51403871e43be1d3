"""The single-GPU peer of bench/gpu_check.sh: a plain PyTorch eager training loop of loom's GPT
(the blocks of src/loom/model/gpt.cpp with model.attention = flash: pre-LayerNorm, fused QKV,
scaled_dot_product_attention(is_causal=True), GELU MLP of 4x width, untied head), in bf16 the
way PyTorch users train: torch.autocast(bfloat16) over fp32 parameters, fused AdamW.

    python bench/peers/eager_gpt.py --width 1024 --layers 12 --seq-len 1024 --micro-batch 8

Prints one line: tokens/s over --steps steps after --warmup steps (mean step time). With
--profile FILE, two more steps run under torch.profiler: the GPU's kernel time per step by kind
(matrix products, attention, optimizer, the rest) is printed and every kernel written to FILE.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from gpt_model import GPT


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
    p.add_argument("--profile", metavar="FILE", help="kernel times of two more steps, to FILE")
    a = p.parse_args()

    dev = torch.device(a.device)
    torch.manual_seed(1234)
    model = GPT(a.vocab, a.seq_len, a.width, a.layers, a.heads, attention="flash").to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=dev.type == "cuda")
    gen = torch.Generator(device=dev).manual_seed(0)

    def step():
        for _ in range(a.microbatches):
            idx = torch.randint(0, a.vocab, (a.micro_batch, a.seq_len + 1), device=dev, generator=gen)
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                logits = model(idx[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, a.vocab), idx[:, 1:].reshape(-1))
            (loss / a.microbatches).backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        loss.item()  # the step's end on the host, as loom's step ends with its loss

    times = []
    for i in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        step()
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    step_s = sum(times) / len(times)
    tokens = a.micro_batch * a.microbatches * a.seq_len
    params = sum(p.numel() for p in model.parameters())
    print(f"eager: {tokens / step_s:.0f} tokens/s, {step_s * 1e3:.1f} ms/step, {params} parameters")
    if a.profile:
        profile(step, a.profile, 2, dev)


def kind_of(kernel):
    k = kernel.lower()
    if any(w in k for w in ("flash", "fmha", "attention", "attn")):
        return "attention"
    if "adam" in k:
        return "optimizer"
    if any(w in k for w in ("gemm", "nvjet", "cutlass", "xmma", "cublas", "matmul", "addmm", "bmm")):
        return "matrix products"
    if k.endswith("::mm"):
        return "matrix products"
    return "the rest"


def profile(step, path, steps, dev):
    """On a GPU its kernels; on the CPU (a dry run) the operators' own CPU time."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    gpu = dev.type == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    sync()
    t0 = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CUDA if gpu else ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        sync()
    wall = (time.perf_counter() - t0) / steps
    rows = []
    for e in prof.key_averages():
        us = e.self_device_time_total if gpu else e.self_cpu_time_total
        if us > 0:
            rows.append((us / steps, e.count // steps, e.key))
    rows.sort(reverse=True)
    by = {}
    for us, _, name in rows:
        by[kind_of(name)] = by.get(kind_of(name), 0.0) + us
    total = sum(by.values())
    with open(path, "w") as f:
        for us, n, name in rows:
            f.write(f"{us / 1e3:9.3f} ms {n:5d}x {kind_of(name):16s} {name}\n")
    parts = ", ".join(f"{k} {v / 1e3:.1f} ms" for k, v in sorted(by.items(), key=lambda x: -x[1]))
    print(f"profile: kernels {total / 1e3:.1f} ms of a {wall * 1e3:.1f} ms step (profiled): {parts}")
    if gpu:
        idle, largest = idle_gaps(prof.events())
        with open(path, "a") as f:
            f.write(f"# GPU idle between kernels: {idle / steps / 1e3:.3f} ms per step; the largest gaps:\n")
            for gap, before, after in largest:
                f.write(f"{gap / 1e3:9.3f} ms after {before[:80]} | before {after[:80]}\n")
        print(f"profile: GPU idle between kernels {idle / steps / 1e3:.1f} ms per step "
              f"(largest {largest[0][0] / 1e3 if largest else 0:.2f} ms)")


def idle_gaps(events, top=12):
    """The device's idle time between its first and last kernel (microseconds), and the
    largest gaps with the kernels around them: where the GPU waited for the host."""
    kernels = sorted((e.time_range.start, e.time_range.end, e.name) for e in events
                     if str(e.device_type).endswith("CUDA") and e.time_range.end > e.time_range.start)
    idle, gaps, busy_until, last = 0.0, [], None, ""
    for start, end, name in kernels:
        if busy_until is not None and start > busy_until:
            idle += start - busy_until
            gaps.append((start - busy_until, last, name))
        if busy_until is None or end >= busy_until:
            busy_until, last = end, name
    gaps.sort(reverse=True)
    return idle, gaps[:top]


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Split Narayanan et al. 2021 Table 2's PTD-P steps into work per micro-batch and a fixed part.

Each Table 2 family (174.6B, 529.6B) keeps the layout and the global batch and grows the
data-parallel degree, so a step is W / dp + C: W the work of all the batch's micro-batches on
one pipeline, C what every step pays whatever its micro-batch count (the pipeline's fill and
drain, the gradient all-reduce, the optimizer). Published steps follow from the published
TFLOP/s and the simulation's own FLOP count (same model, same count). The least-squares fit of
W and C to the published rows is set beside the fit to the simulated ones, for each number of
virtual pipeline stages v. Prints a markdown table.

usage: bench/megatron_step_split.py [BUILD=build]   (CLUSTER=clusters/a100-80gb.toml)
"""
import json
import os
import subprocess
import sys

# name, layers, hidden, heads, pp, loops to try, rows of (GPUs, global batch, published TFLOP/s)
FAMILIES = [
    ("174.6B", 96, 12288, 96, 12, [1, 2, 4],
     [(384, 1536, 153), (768, 1536, 149), (1536, 1536, 141)]),
    ("529.6B", 105, 20480, 128, 35, [1, 3],
     [(560, 2240, 171), (1120, 2240, 167), (2240, 2240, 159)]),
]


def simulate(loom, cluster, layers, hidden, heads, pp, loops, gpus, batch):
    schedule = "interleaved" if loops > 1 else "1f1b"
    cmd = [loom, "simulate", "--model", "gpt", "--layers", str(layers), "--width", str(hidden),
           "--heads", str(heads), "--seq-len", "2048", "--vocab", "51200", "--cluster", cluster,
           "--gpus", str(gpus), "--pp", str(pp), "--tp", "8", "--global-batch", str(batch),
           "--micro-batch-size", "1", "--dp-mode", "allreduce", "--schedule", schedule,
           "--loops", str(loops), "--recompute", "full", "--blocking-p2p",
           "--grad-reduce-after-flush", "--megatron", "--precision", "fp16", "--json"]
    r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return r["step_s"], r["tflops_per_device"]


def fit(dps, steps):
    """Least squares of step = W / dp + C."""
    xs = [1.0 / d for d in dps]
    mx, my = sum(xs) / len(xs), sum(steps) / len(steps)
    w = sum((x - mx) * (y - my) for x, y in zip(xs, steps)) / sum((x - mx) ** 2 for x in xs)
    return w, my - w * mx


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    loom = os.path.join(build, "bin", "loom")
    cluster = os.environ.get("CLUSTER", "clusters/a100-80gb.toml")
    print("| model | v | W simulated (s) | W published (s) | C simulated (s) | C published (s) |")
    print("|---|---|---|---|---|---|")
    for name, layers, hidden, heads, pp, loops_list, rows in FAMILIES:
        dps = [gpus // (8 * pp) for gpus, _, _ in rows]
        for loops in loops_list:
            sims = [simulate(loom, cluster, layers, hidden, heads, pp, loops, g, b)
                    for g, b, _ in rows]
            published = [step * tflops / pub for (step, tflops), (_, _, pub) in zip(sims, rows)]
            w_sim, c_sim = fit(dps, [step for step, _ in sims])
            w_pub, c_pub = fit(dps, published)
            print(f"| {name} | {loops} | {w_sim:.1f} | {w_pub:.1f} | {c_sim:.2f} | {c_pub:.2f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Summarizes bench/slim_fashion.sh: a markdown table, results.json, and an SVG of test accuracy
against bytes moved, drawn by hand (no plotting package).

usage: bench/slim_report.py OUT_DIR REPS NAME...
  full runs: OUT_DIR/NAME-local, OUT_DIR/NAME-emulated-1gbit
  timing runs: OUT_DIR/time/NAME-{local,emulated-1gbit}-{1..REPS}
"""
import json
import os
import statistics
import sys

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"]


def read_run(path):
    steps, evals = [], []
    with open(os.path.join(path, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if "eval_accuracy" in row:
                evals.append(row)
            elif "step_s" in row and "loss" in row:
                steps.append(row)
    with open(os.path.join(path, "command.json")) as f:
        cmd = json.load(f)
    bytes_at = {r["step"]: r["dp_bytes"] for r in steps}
    return {
        "steps": len(steps),
        "accuracy": evals[-1]["eval_accuracy"] * 100,
        "dp_bytes": steps[-1]["dp_bytes"],  # rank 0, whole run
        "train_s": sum(r["step_s"] for r in steps),
        "wall_s": cmd["wall_s"],
        "command": cmd["cmd"],
        "curve": [(bytes_at[e["step"]], e["eval_accuracy"] * 100) for e in evals],
    }


def timing(out, name, link, reps):
    runs = [read_run(os.path.join(out, "time", f"{name}-{link}-{r}")) for r in range(1, reps + 1)]
    return {
        "steps": runs[0]["steps"],
        "train_s": statistics.median(r["train_s"] for r in runs),
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "train_s_all": [r["train_s"] for r in runs],
        "dp_bytes": runs[0]["dp_bytes"],
    }


def mib(b):
    return b / 2**20


def svg_plot(runs, path):
    w, h, left, right, top, bottom = 640, 400, 70, 190, 30, 50
    pw, ph = w - left - right, h - top - bottom
    xmax = max(b for r in runs.values() for b, _ in r["curve"]) * 1.05
    accs = [a for r in runs.values() for _, a in r["curve"]]
    ylo, yhi = int(min(accs) // 5 * 5), min(100, int(max(accs) // 5 * 5 + 5))
    x = lambda b: left + pw * b / xmax
    y = lambda a: top + ph * (1 - (a - ylo) / (yhi - ylo))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{left}" y="18" font-size="14">Fashion-MNIST CNN, 4 ranks: test accuracy '
           f'vs bytes sent (rank 0)</text>']
    # Axes with ticks.
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>')
    step = 10 ** len(str(int(mib(xmax) / 5))) / 10 or 1
    while mib(xmax) / step > 8:
        step *= 2
    t = 0.0
    while t <= mib(xmax):
        px = x(t * 2**20)
        out.append(f'<line x1="{px:.1f}" y1="{top + ph}" x2="{px:.1f}" y2="{top + ph + 5}" stroke="black"/>')
        out.append(f'<text x="{px:.1f}" y="{top + ph + 18}" text-anchor="middle">{t:g}</text>')
        t += step
    for a in range(ylo, yhi + 1, 5):
        py = y(a)
        out.append(f'<line x1="{left - 5}" y1="{py:.1f}" x2="{left + pw}" y2="{py:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{py + 4:.1f}" text-anchor="end">{a}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{h - 10}" text-anchor="middle">MiB sent by rank 0 '
               f'(data-parallel traffic)</text>')
    out.append(f'<text x="16" y="{top + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {top + ph / 2})">test accuracy (%)</text>')
    for i, (name, r) in enumerate(runs.items()):
        c = COLORS[i % len(COLORS)]
        pts = " ".join(f"{x(b):.1f},{y(a):.1f}" for b, a in r["curve"])
        out.append(f'<polyline points="{pts}" fill="none" stroke="{c}" stroke-width="2"/>')
        for b, a in r["curve"]:
            out.append(f'<circle cx="{x(b):.1f}" cy="{y(a):.1f}" r="3" fill="{c}"/>')
        ly = top + 10 + 20 * i
        out.append(f'<line x1="{left + pw + 15}" y1="{ly}" x2="{left + pw + 35}" y2="{ly}" '
                   f'stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 40}" y="{ly + 4}">{name} ({r["accuracy"]:.2f} %)</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    out, reps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    local = {n: read_run(os.path.join(out, n + "-local")) for n in names}
    emu = {n: read_run(os.path.join(out, n + "-emulated-1gbit")) for n in names}
    base = local[names[0]]
    print(f"full runs, {base['steps']} steps, one run each (times on a shared machine are noisy; "
          f"see the timing table):\n")
    print(f"| mode | test accuracy (%) | vs {names[0]} (points) | MiB sent per rank | "
          f"vs {names[0]} | train time | wall time | train time, EMULATED 1 Gbit/s | "
          f"wall time, EMULATED 1 Gbit/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        r, e = local[n], emu[n]
        print(f"| {n} | {r['accuracy']:.2f} | {r['accuracy'] - base['accuracy']:+.2f} | "
              f"{mib(r['dp_bytes']):.1f} | {r['dp_bytes'] / base['dp_bytes'] * 100:.1f} % | "
              f"{r['train_s']:.1f} s | {r['wall_s']:.1f} s | {e['train_s']:.1f} s | "
              f"{e['wall_s']:.1f} s |")
    print()
    for n in names:
        if abs(local[n]["accuracy"] - emu[n]["accuracy"]) > 1e-9:
            print(f"note: {n} reached {emu[n]['accuracy']:.2f} % on the emulated link run "
                  f"(timing only should differ)")
        if n.startswith("slim"):
            r = local[n]
            ratio = r["dp_bytes"] / base["dp_bytes"]
            gap = r["accuracy"] - base["accuracy"]
            ok = ratio <= 0.35 and gap >= -0.5
            print(f"target for {n}: bytes {ratio * 100:.1f} % of {names[0]} (<= 35 %), accuracy "
                  f"{gap:+.2f} points (>= -0.5): {'MET' if ok else 'NOT MET'}")
    # Timing: medians over interleaved repetitions of short runs.
    tl = {n: timing(out, n, "local", reps) for n in names}
    te = {n: timing(out, n, "emulated-1gbit", reps) for n in names}
    steps = tl[names[0]]["steps"]
    print(f"\ntiming, median of {reps} runs of {steps} steps (train time = sum of step times):\n")
    print("| mode | MiB sent per rank per step | train time | train time, EMULATED 1 Gbit/s | "
          "added by the link | link time at 1 Gbit/s (bytes / bandwidth) | wall time | "
          "wall time, EMULATED 1 Gbit/s |")
    print("|---|---|---|---|---|---|---|---|")
    for n in names:
        a, e = tl[n], te[n]
        per_step = a["dp_bytes"] / a["steps"]
        print(f"| {n} | {mib(per_step):.3f} | {a['train_s']:.1f} s | {e['train_s']:.1f} s | "
              f"{e['train_s'] - a['train_s']:+.1f} s | {a['dp_bytes'] / 125e6:.1f} s | "
              f"{a['wall_s']:.1f} s | {e['wall_s']:.1f} s |")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"local": local, "emulated_1gbit": emu, "timing_local": tl,
                   "timing_emulated_1gbit": te}, f, indent=1)
    svg_plot(local, os.path.join(out, "accuracy_vs_bytes.svg"))
    print(f"\nwrote {out}/results.json and {out}/accuracy_vs_bytes.svg")


if __name__ == "__main__":
    main()

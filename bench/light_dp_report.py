#!/usr/bin/env python3
"""Summarizes bench/light_dp.sh: markdown tables, results.json, and light_dp.svg (validation loss
against bytes sent and against the time on the emulated 100 Mbit/s link), drawn by hand (no
plotting package).

usage: bench/light_dp_report.py OUT_DIR STEPS NAME...
  full runs: OUT_DIR/NAME; timing runs: OUT_DIR/time-1Gbit/NAME, OUT_DIR/time-100Mbit/NAME
"""
import json
import math
import os
import sys

COLORS = ["#1f77b4", "#d62728", "#ff9896", "#2ca02c", "#ff7f0e", "#ffbb78", "#9467bd",
          "#c5b0d5", "#8c564b", "#7f7f7f"]


def read_run(path):
    steps, evals, summary = [], [], {}
    with open(os.path.join(path, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if "eval_loss" in row and "summary" not in row:
                evals.append(row)
            elif "step_s" in row and "loss" in row:
                steps.append(row)
            elif row.get("summary") == "run":
                summary = row
    with open(os.path.join(path, "command.json")) as f:
        cmd = json.load(f)
    bytes_at = {r["step"]: r["dp_bytes"] for r in steps}
    return {
        "steps": len(steps),
        "eval_loss": summary["eval_loss"],  # the whole held-out split, after the last step
        "eval_samples": summary["eval_samples"],
        "dp_bytes": steps[-1]["dp_bytes"],  # rank 0, whole run
        "train_s": sum(r["step_s"] for r in steps),
        "wall_s": cmd["wall_s"],
        "command": cmd["cmd"],
        # (step, bytes so far, eval loss); the last point is the whole-split evaluation
        "curve": [(e["step"], bytes_at[e["step"]], e["eval_loss"]) for e in evals],
    }


def mib(b):
    return b / 2**20


def nice_ticks(lo, hi, n=6):
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    t = math.ceil(lo / step) * step
    out = []
    while t <= hi + 1e-9:
        out.append(round(t, 10))
        t += step
    return out


def panel(out, series, x0, w, h, top, xlabel, xlog, ylo, yhi, show_legend):
    """One chart: series is [(name, color, [(x, y), ...])]; appends SVG elements to out."""
    left, bottom = x0 + 60, top + h - 45
    pw, ph = w - 75, h - 45 - 10
    xs = [x for _, _, pts in series for x, _ in pts if (x > 0 or not xlog)]
    xlo, xhi = (min(xs), max(xs)) if xs else (0, 1)
    if xlog:
        xlo, xhi = 10 ** math.floor(math.log10(xlo)), 10 ** math.ceil(math.log10(xhi))
        fx = lambda v: left + pw * (math.log10(v) - math.log10(xlo)) / (math.log10(xhi) - math.log10(xlo))
        xticks = [10 ** k for k in range(int(math.log10(xlo)), int(math.log10(xhi)) + 1)]
    else:
        xlo, xhi = 0, xhi * 1.05
        fx = lambda v: left + pw * (v - xlo) / (xhi - xlo)
        xticks = nice_ticks(xlo, xhi)
    fy = lambda v: top + 10 + ph * (1 - (v - ylo) / (yhi - ylo))
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{left + pw}" y2="{bottom}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top + 10}" x2="{left}" y2="{bottom}" stroke="black"/>')
    for t in xticks:
        px = fx(t)
        out.append(f'<line x1="{px:.1f}" y1="{bottom}" x2="{px:.1f}" y2="{bottom + 5}" stroke="black"/>')
        out.append(f'<text x="{px:.1f}" y="{bottom + 18}" text-anchor="middle">{t:g}</text>')
    for t in nice_ticks(ylo, yhi):
        py = fy(t)
        out.append(f'<line x1="{left - 5}" y1="{py:.1f}" x2="{left + pw}" y2="{py:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 8}" y="{py + 4:.1f}" text-anchor="end">{t:g}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{bottom + 36}" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="{x0 + 14}" y="{top + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 {x0 + 14} {top + ph / 2})">validation loss (nats/byte)</text>')
    for i, (name, color, pts) in enumerate(series):
        pts = [(x, y) for x, y in pts if x > 0 or not xlog]
        line = " ".join(f"{fx(x):.1f},{fy(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"/>')
        if pts:
            x, y = pts[-1]
            out.append(f'<circle cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="4" fill="{color}"/>')
        if show_legend:
            ly = top + 20 + 18 * i
            lx = left + pw - 170
            out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{color}" stroke-width="2"/>')
            out.append(f'<text x="{lx + 24}" y="{ly + 4}">{name}</text>')


def svg_plot(full, timed_step_s, path):
    w, h = 1100, 460
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           '<text x="60" y="20" font-size="14">Byte-level GPT on fortunes, 4 ranks of data '
           'parallelism: validation loss (dots: the whole held-out split after the last step)</text>']
    losses = [l for r in full.values() for _, _, l in r["curve"]]
    ylo, yhi = math.floor(min(losses) * 10) / 10, math.ceil(min(max(losses), min(losses) + 1.5) * 10) / 10
    by_bytes, by_time = [], []
    for i, (name, r) in enumerate(full.items()):
        c = COLORS[i % len(COLORS)]
        pts = [(p, l) for _, p, l in r["curve"] if l <= yhi]
        by_bytes.append((name, c, [(mib(b), l) for b, l in pts]))
        per_step = timed_step_s[name]
        by_time.append((name, c, [(s * per_step, l) for s, _, l in r["curve"] if l <= yhi]))
    panel(out, by_bytes, 0, 550, h - 30, 30, "MiB sent by rank 0 (log scale)", True, ylo, yhi, False)
    panel(out, by_time, 550, 550, h - 30, 30,
          "seconds on an EMULATED 100 Mbit/s link (extrapolated)", False, ylo, yhi, True)
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    out, steps, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    full = {n: read_run(os.path.join(out, n)) for n in names}
    timed = {link: {n: read_run(os.path.join(out, "time-" + link, n)) for n in names}
             for link in ("1Gbit", "100Mbit")}
    # seconds per step on each emulated link (the sum of the timed steps' times)
    per_step = {link: {n: t[n]["train_s"] / t[n]["steps"] for n in names}
                for link, t in timed.items()}
    base = names[0]
    b = full[base]
    print(f"{b['steps']} steps, {b['eval_samples']} held-out samples; times on an EMULATED link "
          f"(loom delays each communication; not a network), extrapolated from "
          f"{timed['100Mbit'][base]['steps']} timed steps on each.\n")
    print(f"| method | validation loss | vs {base} | MiB sent per rank | vs {base} | "
          f"time, 1 Gbit/s | vs {base} | time, 100 Mbit/s | vs {base} |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = {}
    for n in names:
        r = full[n]
        t1, t100 = per_step["1Gbit"][n] * steps, per_step["100Mbit"][n] * steps
        rows[n] = {"loss_gap": r["eval_loss"] / b["eval_loss"] - 1,
                   "bytes_ratio": r["dp_bytes"] / b["dp_bytes"],
                   "time_1gbit_s": t1, "time_100mbit_s": t100,
                   "speedup_1gbit": per_step["1Gbit"][base] / per_step["1Gbit"][n],
                   "speedup_100mbit": per_step["100Mbit"][base] / per_step["100Mbit"][n]}
        print(f"| {n} | {r['eval_loss']:.4f} | {rows[n]['loss_gap'] * 100:+.2f} % | "
              f"{mib(r['dp_bytes']):.1f} | {rows[n]['bytes_ratio'] * 100:.1f} % | "
              f"{t1:.0f} s | {rows[n]['speedup_1gbit']:.2f}x | "
              f"{t100:.0f} s | {rows[n]['speedup_100mbit']:.2f}x |")
    print()
    eligible = [n for n in names[1:] if rows[n]["loss_gap"] <= 0.01]
    if eligible:
        best = min(eligible, key=lambda n: rows[n]["bytes_ratio"])
        r = rows[best]
        ok = r["bytes_ratio"] <= 0.10 and r["speedup_100mbit"] > 1
        print(f"target: the lightest method within 1 % of {base}'s loss is {best}: "
              f"{r['bytes_ratio'] * 100:.1f} % of the bytes (<= 10 %), "
              f"{r['speedup_100mbit']:.2f}x {base}'s speed at 100 Mbit/s (> 1): "
              f"{'MET' if ok else 'NOT MET'}")
    else:
        print(f"target: no method ends within 1 % of {base}'s loss: NOT MET")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"full": full, "timed": timed, "summary": rows}, f, indent=1)
    svg_plot(full, per_step["100Mbit"], os.path.join(out, "light_dp.svg"))
    print(f"\nwrote {out}/results.json and {out}/light_dp.svg")


if __name__ == "__main__":
    main()

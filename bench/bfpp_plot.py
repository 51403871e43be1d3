#!/usr/bin/env python3
"""SVG plot of bench/bfpp_study.sh's CSV (standard library only): one panel per GPU count,
TFLOP/s per GPU against batch per GPU (log scale), one line per schedule and dp-mode set."""
import csv
import math
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
gpus = sorted({int(r["gpus"]) for r in rows})
bpgs = sorted({float(r["batch_per_gpu"]) for r in rows})
series = [("1f1b", "allreduce+zero1", "#d62728", ""), ("interleaved", "allreduce+zero1", "#ff7f0e", ""),
          ("bfs", "allreduce+zero1", "#1f77b4", ""), ("1f1b", "zero3", "#d62728", "6,4"),
          ("interleaved", "zero3", "#ff7f0e", "6,4"), ("bfs", "zero3", "#1f77b4", "6,4")]
ymax = max([float(r["model_tflops_per_gpu"]) for r in rows if r["model_tflops_per_gpu"]] + [1.0])
ymax = math.ceil(ymax / 20) * 20
W, H, left, top, pw, ph, gap = 1160, 440, 60, 64, 230, 260, 40
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       '<rect width="100%" height="100%" fill="white"/>',
       f'<text x="{left}" y="24" font-size="15" font-weight="bold">52B GPT on A100-80GB (simulated by loom plan): '
       'model TFLOP/s per GPU (proportional to samples/s) vs batch per GPU</text>']
x_of = lambda b, x0: x0 + pw * (math.log2(b) - math.log2(bpgs[0])) / max(1e-9, math.log2(bpgs[-1]) - math.log2(bpgs[0]))
for i, g in enumerate(gpus):
    x0, y0 = left + i * (pw + gap), top
    y_of = lambda v: y0 + ph - ph * v / ymax
    svg.append(f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    svg.append(f'<text x="{x0 + pw / 2}" y="{y0 - 8}" text-anchor="middle" font-weight="bold">{g} GPUs</text>')
    for t in range(0, int(ymax) + 1, 20):
        y = y_of(t)
        svg.append(f'<line x1="{x0}" x2="{x0 + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        if i == 0:
            svg.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{t}</text>')
    for b in bpgs:
        x = x_of(b, x0)
        svg.append(f'<text x="{x:.1f}" y="{y0 + ph + 16}" text-anchor="middle">{b:g}</text>')
    svg.append(f'<text x="{x0 + pw / 2}" y="{y0 + ph + 32}" text-anchor="middle">batch per GPU</text>')
    for sched, modes, color, dash in series:
        pts = [(float(r["batch_per_gpu"]), float(r["model_tflops_per_gpu"])) for r in rows
               if int(r["gpus"]) == g and r["schedule"] == sched and r["dp_modes"] == modes and r["model_tflops_per_gpu"]]
        pts.sort()
        if not pts:
            continue
        path = " ".join(f"{x_of(b, x0):.1f},{y_of(v):.1f}" for b, v in pts)
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        svg.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{extra}/>')
        for b, v in pts:
            svg.append(f'<circle cx="{x_of(b, x0):.1f}" cy="{y_of(v):.1f}" r="2.5" fill="{color}"/>')
svg.append(f'<text x="14" y="{top + ph / 2}" transform="rotate(-90 14 {top + ph / 2})" text-anchor="middle">model TFLOP/s per GPU</text>')
lx, ly = left, top + ph + 55
for k, (sched, modes, color, dash) in enumerate(series):
    x = lx + (k % 3) * 250
    y = ly + (k // 3) * 18
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    svg.append(f'<line x1="{x}" x2="{x + 30}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" stroke-width="2"{extra}/>')
    svg.append(f'<text x="{x + 36}" y="{y}">{sched}, {"zero3" if modes == "zero3" else "allreduce or zero1"}</text>')
svg.append("</svg>")
open(out, "w").write("\n".join(svg) + "\n")

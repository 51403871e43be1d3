"""loom's bytes against the kernel's: usage wire_bytes.py METRICS_JSONL KERNEL_BYTES TOLERANCE.

Two ranks, one a host: loom's count is the sum of both ranks' sent_bytes (the summary line's,
the whole run). Prints both counts and their ratio; exits 1 when the ratio is off 1 by more than
TOLERANCE (relative).
"""
import json
import sys

path, kernel, tolerance = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
summary = [json.loads(line) for line in open(path) if '"summary"' in line][-1]
loom = summary["sent_bytes_r0"] + summary["sent_bytes_r1"]
ratio = kernel / loom
within = abs(ratio - 1) <= tolerance
print(f"loom counted {loom} B, the kernel {kernel} B: kernel/loom {ratio:.3f} "
      f"({'within' if within else 'NOT within'} {tolerance:.0%})")
sys.exit(0 if within else 1)

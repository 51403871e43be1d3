# usage: close_params.py A B TOL: A and B are folders written by `loom checkpoint convert`.
# Exits 0 when they hold the same parameter tensors and, for each, ||a - b|| / ||b|| <= TOL
# (checkpoints of runs under different layouts: the same training up to floating-point order).
# A mode that keeps a model per replica (slim) is compared by its replica 0.
import sys

import chunk_records


def params(folder):
    chunks, _ = chunk_records.read(folder + "/consolidated.pt")
    replica = -1 if any(r < 0 for n, r, _ in chunks if n.startswith("param/")) else 0
    return {n: chunk_records.tensor(*chunks[(n, r, b)]) for n, r, b in chunks
            if n.startswith("param/") and r == replica}


a, b, tol = params(sys.argv[1]), params(sys.argv[2]), float(sys.argv[3])
if not a or a.keys() != b.keys():
    print(f"different parameter names: {sorted(a.keys() ^ b.keys())[:3]}")
    sys.exit(1)
worst = max(((a[k] - b[k]).norm() / b[k].norm().clamp(min=1e-12)).item() for k in a)
print(f"{len(a)} parameter tensors, max relative difference {worst:.3g} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)

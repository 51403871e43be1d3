# usage: same_params.py REF_STEP_DIR STEP_DIR...: exits 0 when every rank file of each STEP_DIR
# holds the same chunks (parameters, optimizer state, rng) as REF's, bit for bit, compared
# chunk by chunk (chunk_records.py).
import pathlib
import sys

import chunk_records

ref = pathlib.Path(sys.argv[1])
bad = 0
for other in map(pathlib.Path, sys.argv[2:]):
    for f in sorted(ref.glob("rank-*.pt")):
        a, a_rng = chunk_records.read(f)
        b, b_rng = chunk_records.read(other / f.name)
        diff = [k[0] for k in a if a[k] != b.get(k)]
        if not a or diff or len(a) != len(b) or a_rng != b_rng:
            print(f"{other / f.name}: differs from {f} in {diff[:3] or 'the names or rng'}")
            bad += 1
print(f"compared {len(sys.argv) - 2} runs, {bad} rank files differ")
sys.exit(1 if bad else 0)

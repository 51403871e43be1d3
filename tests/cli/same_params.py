# usage: same_params.py REF_STEP_DIR STEP_DIR...: exits 0 when every rank file of each STEP_DIR
# holds the same tensors (parameters, rng) as REF's, bit for bit. The files themselves differ
# (torch writes a random serialization id), so they are compared tensor by tensor.
import pathlib
import sys

import torch


def tensors(module, prefix=""):
    out = {prefix + n: t for n, t in module.named_buffers(recurse=False)}
    out.update({prefix + n: t for n, t in module.named_parameters(recurse=False)})
    for n, child in module.named_children():
        out.update(tensors(child, prefix + n + "."))
    return out


ref = pathlib.Path(sys.argv[1])
bad = 0
for other in map(pathlib.Path, sys.argv[2:]):
    for f in sorted(ref.glob("rank-*.pt")):
        a = tensors(torch.jit.load(str(f)))
        b = tensors(torch.jit.load(str(other / f.name)))
        diff = [k for k in a if k not in b or not torch.equal(a[k], b[k])]
        if not a or diff or len(a) != len(b):
            print(f"{other / f.name}: differs from {f} in {diff[:3] or 'the names'}")
            bad += 1
print(f"compared {len(sys.argv) - 2} runs, {bad} rank files differ")
sys.exit(1 if bad else 0)

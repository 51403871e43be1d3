"""The machine as a run measured it between its steps (loom train --output.calibrate_every).

usage: insitu_cluster.py CLUSTER METRICS_JSONL OUT PP DP TP

The vCPUs change speed one at a time, for seconds, so every calibration sample k gives one
speed per pipeline rank: the slowest of its data-parallel and tensor-parallel replicas (they run
in lock-step; world rank q is pipeline rank q / (dp tp)) over the profile's forward + backward
of the layer (same micro-batch). Each sample is simulated with those speeds (loom simulate
--rank-speed) and the prediction is the median over the samples: a step follows its slowest
rank more than the mean speed (a rank 1.3x slower makes a 2x1 interleaved step 1.16-1.23x
longer), so averaging the speeds first would predict it too fast.
When there are no more ranks than cores, every block's loaded_slowdown is set to the median
over the samples of (all ranks computing at once) / (alone), combined the same way (with more
ranks than cores that ratio is mostly time sharing, which the simulator models itself: the
profile's value stays, what is measured beyond the fair share becomes `oversubscribed`, and
the CPU the steps used over the CPU of their F/B/I/W becomes `runtime_cpu`: the engines'
polling and the steps' bookkeeping run on the same cores; the simulator applies the two
multiplied).
Writes OUT (the cluster file with that slowdown) and OUT.speeds (one line "s0,s1,.." per
sample); prints "speed loaded", speed = the median over the samples of the mean over pipeline
ranks.
"""
import json, os, re, statistics, sys, tomllib
cluster, metrics, out, pp, dp, tp = sys.argv[1:]
cores = os.cpu_count()
pp, dp, tp = int(pp), int(dp), int(tp)
ranks = pp * dp * tp
rows = [json.loads(l) for l in open(metrics)]
cal = [r for r in rows if "calib_micro_batch" in r]
if not cal:
    sys.exit("no calibration samples in " + metrics + " (CAL=0?)")
b = cal[0]["calib_micro_batch"]
c = tomllib.load(open(cluster, "rb"))
layer = [x for x in c["block"] if x["kind"] == "layer" and x["micro_batch"] == b and x.get("tp", 1) == 1]
if not layer:
    sys.exit(f"{cluster} has no layer at micro-batch {b}; profile it (SIZES)")
unit = (layer[0]["forward_ms"] + layer[0]["backward_ms"]) / 1e3
def per_rank(r, what):  # the slowest replica (dp x tp) of each pipeline rank
    return [max(r[f"calib_{what}_s_r{(p * dp + d) * tp + q}"] for d in range(dp) for q in range(tp))
            for p in range(pp)]
speeds = [[t / unit for t in per_rank(r, "layer")] for r in cal]
f = statistics.median(statistics.mean(s) for s in speeds)
text = open(cluster).read()
if ranks <= int(cores):
    loaded = statistics.median(statistics.mean(per_rank(r, "loaded")) / statistics.mean(per_rank(r, "layer"))
                               for r in cal)
    slowdown = max(1.0, loaded)
    text = re.sub(r"^loaded_slowdown = .*\n", "", text, flags=re.M)
    text = text.replace("[[block]]\n", f"[[block]]\nloaded_slowdown = {slowdown:g}\n")
    what = f"loaded_slowdown {slowdown:.4f} as measured during the run"
else:
    # More ranks than cores: the profile's slowdown stays and the simulator time-shares the
    # cores; what all ranks computing at once measured beyond the fair share (ranks / cores)
    # becomes the oversubscription (another workload on the machine, switching, caches).
    slowdown = layer[0].get("loaded_slowdown", 1.0)
    ratio = statistics.median(statistics.mean(per_rank(r, "loaded")) / statistics.mean(per_rank(r, "layer"))
                              for r in cal)
    over = max(1.0, ratio * int(cores) / ranks / slowdown)
    # The cores also run what is not F/B/I/W: each engine thread's polling while its rank
    # waits, the step's bookkeeping. The steps' CPU over their compute's CPU (every rank's,
    # loom train's world_cpu_s / world_compute_cpu_s) is the node's runtime_cpu (the profile
    # measures it on a short run of two ranks; this run's own replaces it).
    steps = [r for r in rows if r.get("world_compute_cpu_s", 0) > 0][3:]
    besides = max(1.0, statistics.median(r["world_cpu_s"] / r["world_compute_cpu_s"] for r in steps) if steps else 1.0)
    text = re.sub(r"^(oversubscribed|runtime_cpu) = .*\n", "", text, flags=re.M)
    text = text.replace("[node]\n", f"[node]\noversubscribed = {over:g}\nruntime_cpu = {besides:g}\n", 1)
    what = (f"loaded_slowdown kept ({ranks} ranks on {cores} cores), oversubscribed {over:.3f} and "
            f"runtime_cpu {besides:.3f} (the CPU outside F/B/I/W) measured")
    slowdown = over * besides
open(out, "w").write(f"# {cluster}: {what}; compute speeds per rank in {out}.speeds\n" + text)
open(out + ".speeds", "w").write("".join(",".join(f"{x:.4f}" for x in s) + "\n" for s in speeds))
print(f"{f:.4f} {slowdown:.4f}")

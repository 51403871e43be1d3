#!/usr/bin/env bash
# What a checkpoint costs in memory: the peak resident memory of a rank (the largest; GNU
# time's %M of the launcher, which counts the ranks it waited for) in runs of the GPT of
# bench/gpt_checkpoints.toml on RANKS local ranks:
#   fresh   one step from scratch, no checkpoint but the last (its save's peak);
#   resume  one step resumed from a checkpoint of the same layout (pp RANKS);
#   reshard one step resumed from it under another layout (dp RANKS, allreduce; with 1 rank,
#           zero1 instead of allreduce);
#   fresh-dp the same as fresh under reshard's layout;
#   gather  one step resumed under pp RANKS from a checkpoint of dp RANKS zero3 (every rank
#           reads every file, each a shard of the whole model, and keeps its stage's part).
# A resume's extra memory is its peak above the fresh run of its layout.
# usage: bench/resume_memory.sh [BUILD_DIR] [RANKS] [ROUNDS]
# shellcheck source=bench/gpt_bench_lib.sh
source "$(dirname "$0")/gpt_bench_lib.sh" 1 "$@"
pp=(--pp "$ranks")
dp=(--dp "$ranks" --dp-mode allreduce)
[ "$ranks" = 1 ] && dp=(--dp-mode zero1)

# peak NAME STEPS FLAGS...: one run; its peak memory (kB) on stdout.
peak() {
  local name=$1 steps=$2
  shift 2
  /usr/bin/time -o "$tmp/rss" -f %M "$loom" train --config "$cfg" --nproc "$ranks" --comm gloo \
    --train.steps "$steps" "$@" >"$tmp/$name.log" 2>&1 || { cat "$tmp/$name.log" >&2; exit 1; }
  tail -1 "$tmp/rss"
}

peak saved 2 "${pp[@]}" --output.dir "$tmp/saved" >/dev/null
peak sharded 2 --dp "$ranks" --dp-mode zero3 --output.dir "$tmp/sharded" >/dev/null
declare -A peaks=()
for ((r = 0; r < rounds; r++)); do
  peaks[fresh]+="$(peak fresh 1 "${pp[@]}" --output.dir "$tmp/fresh" --overwrite) "
  peaks[resume]+="$(peak resume 3 "${pp[@]}" --output.dir "$tmp/resume" --overwrite \
    --resume "$tmp/saved/checkpoint") "
  peaks[reshard]+="$(peak reshard 3 "${dp[@]}" --output.dir "$tmp/reshard" --overwrite \
    --resume "$tmp/saved/checkpoint") "
  peaks[fresh-dp]+="$(peak fresh-dp 1 "${dp[@]}" --output.dir "$tmp/fresh-dp" --overwrite) "
  peaks[gather]+="$(peak gather 3 "${pp[@]}" --output.dir "$tmp/gather" --overwrite \
    --resume "$tmp/sharded/checkpoint") "
done
grep -h "resharding" "$tmp/reshard.log" | head -1 >&2 || true
python3 - "$ranks" "${peaks[fresh]}" "${peaks[resume]}" "${peaks[reshard]}" "${peaks[fresh-dp]}" \
  "${peaks[gather]}" <<'PY'
import statistics, sys
ranks = int(sys.argv[1])
fresh, resume, reshard, fresh_dp, gather = (statistics.median(int(x) / 1024 for x in a.split())
                                             for a in sys.argv[2:7])
print(f"{ranks} ranks: peak memory of the largest rank (median MB)")
print("| run | peak | above the fresh run of its layout |")
print("|---|---|---|")
print(f"| fresh (pp {ranks}) | {fresh:.0f} MB | |")
print(f"| resume (pp {ranks}) | {resume:.0f} MB | {resume - fresh:+.0f} MB |")
print(f"| fresh (dp {ranks}) | {fresh_dp:.0f} MB | |")
print(f"| reshard pp {ranks} -> dp {ranks} | {reshard:.0f} MB | {reshard - fresh_dp:+.0f} MB |")
print(f"| reshard dp {ranks} zero3 -> pp {ranks} | {gather:.0f} MB | {gather - fresh:+.0f} MB |")
PY

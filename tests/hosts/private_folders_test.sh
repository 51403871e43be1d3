#!/usr/bin/env bash
# Hosts that do not share the run folder (node-local disks: each host's own directory mounted
# at the same path, in a mount namespace of its own), 2 hosts x 2 ranks, pp 2 x dp 2:
#  - the run trains and saves; rank 0 says once, at the start, that ranks 2-3 on host 1 do not
#    see its folder; each host then holds the manifests, its ranks' files and a copy of the
#    other host's;
#  - the same layout resumes from each host's own files, nothing fetched;
#  - host 1's disk lost (its folder emptied): a dp 4 resume copies the manifest and fetches the
#    files host 1's ranks read from host 0, and trains to the same loss as a resume that
#    fetched nothing;
#  - host 0's disk lost instead (rank 0's): the same layout resumes in place from host 1's
#    copies, to the same loss as the first resume, with the run's metrics.jsonl from host 1;
#  - host 0's disk lost again: `loom checkpoint gather` on both hosts brings every file of the
#    checkpoint back into host 0's folder, where `loom checkpoint info` reads it;
#  - a rank file lost on both hosts: the resume goes back to step 2 with one warning naming it;
#    named by its step folder, the checkpoint is refused: one line naming it, exit 2 on both;
#  - a copy that cannot be written fails the save: one line, the last checkpoint intact; so
#    does a rank's own write, at once or in the background (output.async_save); a save in the
#    background leaves both hosts the same files as one written at once, its copies made while
#    the next steps train;
#  - three hosts of one rank, pp 3, `--output.host_copies 2`: every host holds every rank file;
#    two disks lost at once (hosts 1 and 2), the run resumes from host 0's copies, to the same
#    loss as with no disk lost.
# usage: private_folders_test.sh LOOM_BINARY HOSTS_SH
set -u
# shellcheck source=tests/hosts/hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
bash "$hosts_sh" up 2 >/dev/null || fail "up 2"
mkdir -p "$tmp/h0" "$tmp/h1" "$tmp/run"

# on_hosts N FOLDER NAME PORT NPROC CMD...: CMD as NPROC ranks a host under loom launch on
# hosts 0..N-1, host K with $tmp/FOLDERK at $tmp/run; waits for all; exit codes in $rcs, node
# K's output in $tmp/NAME.K. both NAME PORT NPROC CMD...: on the 2 hosts, folders $tmp/hK.
on_hosts() {
  local n=$1 folder=$2 name=$3 port=$4 nproc=$5 k
  shift 5
  launchers=()
  for ((k = 0; k < n; ++k)); do
    on "$k" unshare -m --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
      _ "$tmp/$folder$k" "$tmp/run" "$loom" launch --nproc "$nproc" --nnodes "$n" --node-rank "$k" \
      --master-addr "$master" --master-port "$port" -- "$@" >"$tmp/$name.$k" 2>&1 &
    launchers+=($!)
  done
  wait_all
}
both() { on_hosts 2 h "$@"; }
# private NAME PORT TRAIN_ARGS...: loom train on both hosts, 2 ranks each.
private() {
  local name=$1 port=$2
  shift 2
  both "$name" "$port" 2 "$loom" train --config "$cfg" --model.layers 4 \
    --output.checkpoint_every 2 "$@"
}
# errors NAME: the error lines of both hosts, and any launcher's line about a rank's exit (a
# rank that exits with 2 has said why: no launcher adds a line).
errors() { cat "$tmp/$1.0" "$tmp/$1.1" | grep -E "error:|^loom: rank"; }
# refused_once NAME LABEL PATTERN: run NAME exited 2 on both hosts with one such line, matching.
refused_once() {
  if [[ ${rcs[*]} == "2 2" && $(errors "$1" | wc -l) -eq 1 ]] && errors "$1" | grep -q "$3"; then
    ok "$2: $(errors "$1")"
  else
    cat "$tmp/$1.0" "$tmp/$1.1"; fail "$2 (exits ${rcs[*]})"
  fi
}

# loss_at NAME STEP: the loss of step STEP in run NAME's metrics (rank 0's host: host 0).
loss_at() { loss_in "$tmp/h0/$1/metrics.jsonl" "$2"; }
# loss_in FILE STEP: the loss of step STEP in the metrics file FILE.
loss_in() { grep "\"step\": $2[,}]" "$1" | grep -o '"loss": [^,}]*'; }
# resumed NAME LABEL [DIR]: run NAME exited 0 on both hosts and trained to step 6 (its folder
# DIR, default NAME).
resumed() {
  local dir=${3:-$1}
  if [[ ${rcs[*]} == "0 0" ]] && ! errors "$1" >/dev/null && [[ -n $(loss_at "$dir" 6) ]]; then
    ok "$2: $(loss_at "$dir" 6)"
  else
    cat "$tmp/$1.0" "$tmp/$1.1"; fail "$2 (exits ${rcs[*]})"
  fi
}

private first 29621 --pp 2 --dp 2 --output.dir "$tmp/run/out"
step4=out/checkpoint/step-000004
every() { for f in manifest.json config.toml rank-00000.pt rank-00001.pt rank-00002.pt rank-00003.pt; do
  [[ -f $1/$step4/$f ]] || return 1; done; grep -qx step-000004 "$1/out/checkpoint/latest"; }
if [[ ${rcs[*]} == "0 0" ]] && every "$tmp/h0" && every "$tmp/h1" &&
   [[ $(grep -c "ranks 2-3 on $LOOM_HOSTS_PREFIX-h1 do not see the run folder" "$tmp/first.0") -eq 1 ]]; then
  ok "trains and saves on private folders, each host holding the manifests and every rank file: $(grep -o 'ranks 2-3 on .*' "$tmp/first.0")"
else
  cat "$tmp/first.0" "$tmp/first.1"; ls -R "$tmp/h0" "$tmp/h1"; fail "first run (exits ${rcs[*]})"
fi
# step_lines FILE: the lines of steps and evaluations (not the summary).
step_lines() { grep '^{"step"' "$1"; }
# The whole file: the lines after the last save too (the run's summary line).
if [[ $(step_lines "$tmp/h0/out/metrics.jsonl" | wc -l) -ge 4 ]] &&
   grep -q '"summary": "run"' "$tmp/h1/out/metrics.jsonl" &&
   cmp -s "$tmp/h0/out/metrics.jsonl" "$tmp/h1/out/metrics.jsonl"; then
  ok "host 1 holds rank 0's metrics.jsonl ($(step_lines "$tmp/h1/out/metrics.jsonl" | wc -l) step lines and the summary)"
else
  fail "metrics.jsonl on host 1: $(wc -l <"$tmp/h1/out/metrics.jsonl" 2>&1)"
fi
cp -a "$tmp/h0/out" "$tmp/out.h0" && cp -a "$tmp/h1/out" "$tmp/out.h1"
# restore: both hosts' folders as the first run left them.
restore() { for k in 0 1; do rm -rf "$tmp/h$k/out" && cp -a "$tmp/out.h$k" "$tmp/h$k/out"; done; }

private same 29622 --pp 2 --dp 2 --steps 6 --output.dir "$tmp/run/same" \
  --resume "$tmp/run/out/checkpoint"
resumed same "the same layout resumes, each rank from its own file"
if grep -q "fetched\|copied from" "$tmp/same.0" "$tmp/same.1"; then fail "same layout fetched files"; fi

private again 29623 --pp 1 --dp 4 --steps 6 --output.dir "$tmp/run/again" \
  --resume "$tmp/run/out/checkpoint"
resumed again "another layout (dp 4) resumes from each host's files"

rm -rf "$tmp/h1/out"
private lost1 29624 --pp 1 --dp 4 --steps 6 --output.dir "$tmp/run/lost1" \
  --resume "$tmp/run/out/checkpoint"
resumed lost1 "host 1's disk lost: a dp 4 resume"
if grep -q "the manifest of checkpoint step 4 copied from rank 0 on $LOOM_HOSTS_PREFIX-h0 to ranks 2-3 on $LOOM_HOSTS_PREFIX-h1" "$tmp/lost1.0" &&
   grep -q "fetched 4 checkpoint files (.* bytes) from other hosts for ranks 2-3 on $LOOM_HOSTS_PREFIX-h1" "$tmp/lost1.0" &&
   [[ $(loss_at lost1 6) == "$(loss_at again 6)" ]] && every "$tmp/h1"; then
  ok "host 1's manifest and the 4 files its ranks read fetched from host 0, the same loss as without: $(grep -o 'fetched .*' "$tmp/lost1.0")"
else
  cat "$tmp/lost1.0" "$tmp/lost1.1"; fail "host 1 lost: $(loss_at lost1 6) vs $(loss_at again 6)"
fi

# Rank 0's host loses its disk; the run goes on in its own folder (in place).
restore
rm -rf "$tmp/h0/out"
private lost0 29625 --pp 2 --dp 2 --steps 6 --output.dir "$tmp/run/out" \
  --resume "$tmp/run/out/checkpoint"
resumed lost0 "host 0's disk lost (rank 0's): the same layout resumes in place" out
if grep -q "copied from rank 2 on $LOOM_HOSTS_PREFIX-h1 to ranks 0-1 on $LOOM_HOSTS_PREFIX-h0" "$tmp/lost0.0" &&
   grep -q "fetched 2 checkpoint files" "$tmp/lost0.0" &&
   [[ $(loss_at out 6) == "$(loss_at same 6)" ]]; then
  ok "rank 0's host got the manifest and its 2 rank files from host 1's copies, the same loss as the first resume"
else
  cat "$tmp/lost0.0" "$tmp/lost0.1"; fail "host 0 lost: $(loss_at out 6) vs $(loss_at same 6)"
fi
# Its metrics.jsonl: the first run's lines up to step 4 (from host 1's copy), then steps 5-6.
if diff <(step_lines "$tmp/out.h0/metrics.jsonl") <(step_lines "$tmp/h0/out/metrics.jsonl" | head -n "$(step_lines "$tmp/out.h0/metrics.jsonl" | wc -l)") >/dev/null &&
   [[ $(grep -c '^{"step": [56], "loss"' "$tmp/h0/out/metrics.jsonl") -eq 2 ]] &&
   [[ $(grep -c '^{"step": [1-6], "loss"' "$tmp/h0/out/metrics.jsonl") -eq 6 ]]; then
  ok "rank 0's new disk has the run's metrics: steps 1-4 from host 1's copy, then 5-6"
else
  cat "$tmp/h0/out/metrics.jsonl"; fail "metrics.jsonl after host 0's loss"
fi

# loom checkpoint gather, one process a host: rank 0's host, its disk lost, gets the manifest
# and all 4 rank files from host 1, and `loom checkpoint info` reads the checkpoint there.
restore
rm -rf "$tmp/h0/out"
both gather 29629 1 "$loom" checkpoint gather "$tmp/run/out/checkpoint"
if [[ ${rcs[*]} == "0 0" ]] &&
   grep -q "(step 4): 4 files, all in the folder of rank 0 on $LOOM_HOSTS_PREFIX-h0; 4 fetched from other hosts" "$tmp/gather.0" &&
   every "$tmp/h0" && "$loom" checkpoint info "$tmp/h0/out/checkpoint" >"$tmp/info" 2>&1 &&
   grep -q "files       4, .* every one matches its size and CRC-32" "$tmp/info"; then
  ok "gather: host 0's empty folder got the manifest and all 4 rank files: $(grep -o '4 files, all .*' "$tmp/gather.0")"
else
  cat "$tmp/gather.0" "$tmp/gather.1" "$tmp/info"; fail "gather (exits ${rcs[*]})"
fi

restore
rm "$tmp/h0/$step4/rank-00002.pt" "$tmp/h1/$step4/rank-00002.pt"
# From the run's checkpoint folder, the ranks agree that step 4 is damaged and resume from step
# 2, one warning naming the file; named by its step folder, step 4 is refused (one line, exit 2).
private gone 29626 --pp 2 --dp 2 --steps 6 --output.dir "$tmp/run/gone" \
  --resume "$tmp/run/out/checkpoint"
if [[ ${rcs[*]} == "0 0" ]] && [[ $(cat "$tmp/gone.0" "$tmp/gone.1" | grep -c "warning:") -eq 1 ]] &&
   cat "$tmp/gone.0" "$tmp/gone.1" | grep -q "rank-00002.pt' is missing; the checkpoint is incomplete; resuming from step-000002, the newest checkpoint before it" &&
   grep -q "resumed at step 2" "$tmp/gone.0"; then
  ok "a rank file lost on both hosts: $(cat "$tmp/gone.0" "$tmp/gone.1" | grep -o "resuming from.*")"
else
  cat "$tmp/gone.0" "$tmp/gone.1"; fail "a rank file lost on both hosts (exits ${rcs[*]})"
fi
private gone4 29632 --pp 2 --dp 2 --steps 6 --output.dir "$tmp/run/gone4" \
  --resume "$tmp/run/$step4"
refused_once gone4 "a rank file lost on both hosts, its step folder named" \
  "checkpoint file '.*/rank-00002.pt' is missing; the checkpoint is incomplete"
said() { cat "$tmp/$1.0" "$tmp/$1.1" | grep "error:"; }  # the launchers add their exit lines
# save_fails NAME PORT KIND FILE WHAT [TRAIN_ARGS...]: LOOM_FAULT_KIND=KIND strikes rank 2 (host
# 1) at the save of step 4; the save must fail as one: one error line naming FILE of step 4 and
# the intact step 2, every rank down, nothing of step 4 left on either host, `latest` still step
# 2 on both.
save_fails() {
  local name=$1 port=$2 kind=$3 file=$4 what=$5
  shift 5
  LOOM_FAULT_RANK=2 LOOM_FAULT_STEP=4 LOOM_FAULT_KIND=$kind \
    private "$name" "$port" --pp 2 --dp 2 --output.dir "$tmp/run/$name" "$@"
  if [[ ${rcs[0]} != 0 && ${rcs[1]} != 0 && $(said "$name" | wc -l) -eq 1 ]] &&
    said "$name" | grep -q "cannot write '.*/step-000004/$file': No space left on device (LOOM_FAULT_KIND=$kind); checkpoint step-000004 not written, the last one (step 2) is intact" &&
    [[ ! -e $tmp/h0/$name/checkpoint/step-000004 && ! -e $tmp/h1/$name/checkpoint/step-000004 ]] &&
    grep -qx step-000002 "$tmp/h0/$name/checkpoint/latest" &&
    grep -qx step-000002 "$tmp/h1/$name/checkpoint/latest"; then
    ok "$what fails the save, step 2 intact on both hosts: $(said "$name")"
  else
    cat "$tmp/$name.0" "$tmp/$name.1"; ls -R "$tmp/h0/$name" "$tmp/h1/$name"
    fail "$what (exits ${rcs[*]})"
  fi
}
# A copy that cannot be written (host 1's disk full as rank 2 receives rank 0's file) fails the
# save as a rank's own write does; and a rank's own write that fails (rank 2's file, written
# beside its copy to host 0).
save_fails copyfail 29627 copy-disk-full rank-00000.pt "a copy that cannot be written"
save_fails ownfail 29628 disk-full rank-00002.pt "a rank's own write that fails beside its copy"
save_fails asyncfail 29630 disk-full rank-00002.pt "a background write (output.async_save)" \
  --steps 6 --output.async_save true
# Written in the background, each host holds the manifest and the four rank files, the bytes
# of the first run's (written at once). The copies run in the background too: with rank 0's
# held 3 s, steps 3 and 4 train before they start (the save completes when step 4's begins).
LOOM_FAULT_RANK=0 LOOM_FAULT_STEP=2 LOOM_FAULT_KIND=slow-copy \
  private async 29631 --pp 2 --dp 2 --output.dir "$tmp/run/async" --output.async_save true \
  --steps 4 --output.progress true
copies_line=$(grep -n -m1 "the copies of step 2 start now" "$tmp/async.0" | cut -d: -f1)
trained_line=$(grep -n -m1 "^step 4/4" "$tmp/async.0" | cut -d: -f1)
if [[ -n $copies_line && -n $trained_line && $trained_line -lt $copies_line ]]; then
  ok "copies in the background: step 4 trained while rank 0's copies of step 2 were held"
else
  cat "$tmp/async.0"
  fail "copies in the background: step 4 at line ${trained_line:-none}, copies at ${copies_line:-none}"
fi
crcs() { grep -o '"crc32": *[0-9]*' "$1/checkpoint/step-000002/manifest.json" | tr -d ' \n'; }
if [[ ${rcs[*]} == "0 0" ]] && [[ -n $(crcs "$tmp/out.h0") && $(crcs "$tmp/h0/async") == "$(crcs "$tmp/out.h0")" &&
      $(crcs "$tmp/h1/async") == "$(crcs "$tmp/out.h0")" ]] &&
   [[ $(compgen -G "$tmp/h[01]/async/checkpoint/step-000002/rank-*.pt" | wc -l) -eq 8 ]]; then
  ok "a save in the background: the manifest and every rank file on both hosts, the first run's bytes"
else
  cat "$tmp/async.0" "$tmp/async.1"; ls -R "$tmp/h0/async" "$tmp/h1/async"; fail "async save on private folders"
fi
no_processes || fail "processes left on the hosts"

# three NAME PORT TRAIN_ARGS...: loom train on 3 hosts of one rank, pp 3, two copies of each
# rank file, host K with $tmp/tK at $tmp/run.
three() {
  local name=$1 port=$2
  shift 2
  on_hosts 3 t "$name" "$port" 1 "$loom" train --config "$cfg" --model.layers 3 --pp 3 \
    --output.host_copies 2 --output.dir "$tmp/run/out" "$@"
}
bash "$hosts_sh" up 3 >/dev/null || fail "up 3"
mkdir -p "$tmp/t0" "$tmp/t1" "$tmp/t2"
three tfirst 29641 --output.checkpoint_every 2
held() { for r in 0 1 2; do [[ -f $1/$step4/rank-0000$r.pt ]] || return 1; done; }
if [[ ${rcs[*]} == "0 0 0" ]] && held "$tmp/t0" && held "$tmp/t1" && held "$tmp/t2"; then
  ok "three hosts, two copies: every host holds the 3 rank files"
else
  cat "$tmp/tfirst."*; ls -R "$tmp/t0" "$tmp/t1" "$tmp/t2"; fail "three hosts (exits ${rcs[*]})"
fi
three_loss() { loss_in "$tmp/t0/out/metrics.jsonl" 6; }
cp -a "$tmp/t0/out" "$tmp/t0.out" && cp -a "$tmp/t1/out" "$tmp/t1.out" && cp -a "$tmp/t2/out" "$tmp/t2.out"
three tkept 29642 --steps 6 --resume "$tmp/run/out/checkpoint"
kept=$(three_loss)
for k in 0 1 2; do rm -rf "$tmp/t$k/out" && cp -a "$tmp/t$k.out" "$tmp/t$k/out"; done
rm -rf "$tmp/t1/out" "$tmp/t2/out"
three tlost 29643 --steps 6 --resume "$tmp/run/out/checkpoint"
if [[ ${rcs[*]} == "0 0 0" && -n $kept && $(three_loss) == "$kept" ]] &&
   grep -q "fetched .* checkpoint files" "$tmp/tlost.0"; then
  ok "two disks lost at once: resumes from host 0's copies ($kept at step 6, as with none lost)"
else
  cat "$tmp/tkept."* "$tmp/tlost."*; fail "two disks lost (exits ${rcs[*]}, kept '$kept')"
fi
no_processes || fail "processes left on the three hosts"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

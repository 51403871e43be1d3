#!/usr/bin/env bash
# Bad input gets one clear line on stderr and exit code 2, and leaves nothing half-written.
# usage: bad_input_test.sh LOOM_BINARY [local|mpi|gloo]
# mpi: failures under mpirun; gloo: the same under loom's own launcher and under torchrun.
set -u
loom=$1
mode=${2:-local}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
fails=0
passes=0

# expect_usage NAME EXPECTED_SUBSTRING -- ARGS...
expect_usage() {
  local name=$1 want=$2
  shift 3
  local out="$tmp/out.$name"
  rm -rf "$out"
  "$loom" "$@" --output.dir "$out" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  local lines
  lines=$(grep -c . "$tmp/stderr")
  if [[ $rc -ne 2 ]]; then
    echo "FAIL $name: exit code $rc, expected 2"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [[ $lines -ne 1 ]]; then
    echo "FAIL $name: $lines lines on stderr, expected 1"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if ! grep -qF -- "$want" "$tmp/stderr"; then
    echo "FAIL $name: message lacks '$want':"; cat "$tmp/stderr"; fails=$((fails + 1)); return
  fi
  if [[ -e "$out" ]]; then
    echo "FAIL $name: output folder $out was created"; fails=$((fails + 1)); return
  fi
  echo "ok   $name: $(cat "$tmp/stderr")"
  passes=$((passes + 1))
}

# The same for a command without an output folder (loom schedule, loom simulate).
expect_command_usage() {
  local name=$1 want=$2
  shift 3
  "$loom" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]] && grep -qF -- "$want" "$tmp/stderr"; then
    echo "ok   $name: $(cat "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL $name: rc=$rc, expected 2 and one line with '$want'"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
}

good="$tmp/good.toml"
cat "$(dirname "$0")/tiny_gpt.toml" - >"$good" <<'TOML'
[train]
steps = 3
global_batch = 8
TOML

if [[ $mode == local ]]; then
  expect_usage missing_config "not found" -- train --config "$tmp/nope.toml" --nproc 2
  # Found by a sweep of bad inputs (docs/reliability.md): sizes past what loom holds (a
  # division by zero, a pipeline of 2^32+1 ranks trained as pp 1, 12 GB before the memory check).
  expect_usage huge_microbatches "train.microbatches must be in 1..1048576" -- train \
    --config "$good" --nproc 2 --microbatches 4294967296
  expect_usage huge_pp "parallel.pp must be in 1..1048576" -- train --config "$good" --nproc 2 \
    --pp 4294967297
  expect_usage huge_layers "model.layers must be in 1..1048576" -- train --config "$good" \
    --nproc 2 --layers 9223372036854775807
  expect_command_usage no_command "no command given" --
  expect_command_usage empty_list_item "'1,,1' has an empty item" -- simulate --model gpt \
    --layers 2 --width 64 --heads 2 --seq-len 64 --gpus 2 --pp 2 --rank-speed 1,,1 \
    --cluster "$(dirname "$0")/../../clusters/a100-80gb.toml"
  # A mistyped timeout was the default in silence (atof("10m") is 10 s).
  LOOM_COMM_TIMEOUT_S=10m expect_usage bad_comm_timeout "LOOM_COMM_TIMEOUT_S='10m' is not a number" \
    -- train --config "$good" --nproc 2
  printf '[model\nlayers = \n' >"$tmp/broken.toml"
  expect_usage unparsable_config "broken.toml" -- train --config "$tmp/broken.toml" --nproc 2
  printf '[model]\nlayerz = 3\n' >"$tmp/unknown.toml"
  expect_usage unknown_field "layers" -- train --config "$tmp/unknown.toml" --nproc 2
  expect_usage unknown_flag "--bogus" -- train --config "$good" --nproc 2 --bogus 3
  expect_usage out_of_range "model.layers" -- train --config "$good" --nproc 2 --layers 0
  expect_usage bad_choice "parallel.schedule" -- train --config "$good" --nproc 2 --schedule fast
  expect_usage dp_not_dividing "dp (3)" -- train --config "$good" --nproc 4 --dp 3
  expect_usage pp_not_dividing "pp (3)" -- train --config "$good" --nproc 4 --pp 3
  expect_usage batch_not_divisible "not divisible" -- train --config "$good" --nproc 4 --global_batch 6
  expect_usage schedule_shape "1f1b" -- train --config "$good" --nproc 2 --pp 2 --loops 2 --schedule 1f1b
  expect_usage zbv_loops "set --loops 2" -- train --config "$good" --nproc 2 --pp 2 --schedule zbv
  expect_usage too_few_blocks "blocks" -- train --config "$good" --nproc 4 --pp 4 --loops 2 --schedule bfs
  # The timeline is written after the last step; its path is checked before the first.
  expect_usage trace_into_folder "is a folder, not a file; pass a writable file path to --output.trace" \
    -- train --config "$good" --nproc 2 --output.trace "$tmp"
  # ... and a timeline inside the run's own folder, not made yet, is fine (however it is spelled).
  if "$loom" train --config "$good" --steps 1 --output.dir "$tmp/traced/" \
    --output.trace "$tmp/traced/t.json" >"$tmp/stdout" 2>"$tmp/stderr" && [[ -s $tmp/traced/t.json ]]; then
    echo "ok   trace_in_new_run_folder"; passes=$((passes + 1))
  else
    echo "FAIL trace_in_new_run_folder"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # A hand-written schedule that lacks an action: one line naming the file and the action, and
  # `loom schedule --file` shows where (its grid follows the line).
  printf '# pp=2 loops=1 microbatches=2 name=x\n0F0,0F1,0B0,0B1\n1F0,1F1,1B1\n' >"$tmp/bad.csv"
  expect_usage bad_schedule_file "schedule file '$tmp/bad.csv' is not a valid schedule: missing backward 1B0" \
    -- train --config "$good" --nproc 2 --pp 2 --microbatches 2 --schedule-file "$tmp/bad.csv"
  "$loom" schedule --file "$tmp/bad.csv" >/dev/null 2>"$tmp/stderr"
  if [[ $? -eq 2 ]] && head -1 "$tmp/stderr" | grep -qF "$tmp/bad.csv: missing backward 1B0" &&
    grep -q '^rank 1 |  1F0   1F1   1B1$' "$tmp/stderr"; then
    echo "ok   bad_schedule_file_grid"; passes=$((passes + 1))
  else
    echo "FAIL bad_schedule_file_grid"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  expect_usage missing_dataset "not found" -- train --config "$good" --nproc 2 --model.kind cnn \
    --data.kind fashion-mnist --data.path "$tmp/no-such-folder"
  mkdir -p "$tmp/corrupt"
  printf 'this is not an idx file' | gzip >"$tmp/corrupt/train-images-idx3-ubyte.gz"
  cp /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz "$tmp/corrupt/" 2>/dev/null ||
    printf 'x' | gzip >"$tmp/corrupt/train-labels-idx1-ubyte.gz"
  expect_usage corrupt_idx "train-images-idx3-ubyte.gz" -- train --config "$good" --nproc 2 \
    --model.kind cnn --data.kind fashion-mnist --data.path "$tmp/corrupt"
  expect_usage calibrate_not_transformer "output.calibrate_every" -- train --config "$good" --nproc 2 \
    --model.kind cnn --data.kind synthetic --output.calibrate_every 2
  expect_usage missing_text "not found" -- train --config "$good" --nproc 2 --data.kind text \
    --data.path "$tmp/no-text"
  # The --resume target is checked before any rank starts: one line, not one per rank.
  expect_usage resume_missing "no checkpoint at" -- train --config "$good" --nproc 2 \
    --resume "$tmp/no-checkpoint"
  "$loom" train --config "$good" --nproc 2 --comm gloo --steps 1 --output.dir "$tmp/ckpt" \
    >"$tmp/stdout" 2>"$tmp/stderr" || { echo "FAIL resume_mismatch: first run"; cat "$tmp/stderr"; }
  expect_usage resume_mismatch "was written with model.layers" -- train \
    --config "$good" --nproc 2 --layers 5 --resume "$tmp/ckpt/checkpoint"
  # Checked by the launcher before any rank starts: the memory the planner's model estimates,
  # and a vocabulary too small for byte-level text.
  # Each rank's libraries count too (~200 MB a process: 256 ranks of a tiny model overran this
  # machine's memory); only that they are counted is checked: a regression would start them.
  expect_usage too_big_for_memory "MiB of libraries per process), this machine has" -- train \
    --config "$good" --nproc 2 --width 16384 --layers 48 --heads 16
  # With checkpoints in the background, each rank's copy of its state counts too.
  expect_usage too_big_with_async_saves " of an async save's copy of the state and " -- train \
    --config "$good" --nproc 2 --width 16384 --layers 48 --heads 16 --output.async_save true
  # The same for a lone process (no --nproc), which was built until the OOM killer ended it;
  # an --overwrite of a run folder leaves that run as it was.
  cp -r "$tmp/ckpt" "$tmp/kept"
  expect_usage too_big_alone "this model needs about" -- train --config "$good" \
    --width 16384 --layers 48 --heads 16
  "$loom" train --config "$good" --width 16384 --layers 48 --heads 16 --overwrite \
    --output.dir "$tmp/kept" >/dev/null 2>&1
  if [[ $? -eq 2 && -f $tmp/kept/metrics.jsonl && -f $tmp/kept/checkpoint/latest ]]; then
    echo "ok   too_big_overwrite: the run folder is kept"; passes=$((passes + 1))
  else
    echo "FAIL too_big_overwrite: $(ls -R "$tmp/kept")"; fails=$((fails + 1))
  fi
  expect_usage vocab_below_bytes "set --vocab 256" -- train --config "$good" --nproc 2 \
    --data.kind text --vocab 100
  # Tensor parallelism splits whole heads; sequence parallelism needs tp > 1.
  expect_usage tp_not_dividing_heads "must divide model.heads (2)" -- train --config "$good" \
    --nproc 3 --tp 3
  expect_usage sequence_parallel_without_tp "but tp is 1" -- train --config "$good" --nproc 2 \
    --sequence-parallel
  expect_usage recompute_a_cnn "recomputes transformer layers" -- train --config "$good" \
    --nproc 2 --model.kind cnn --data.kind synthetic --recompute full
  # Devices and precision: no GPU on a machine without one (CI's); bf16 reduction is for the
  # modes that reduce gradients.
  # The reason is the right one: a CUDA build on a machine without a GPU is not "built
  # without CUDA" (torch::hasCUDA() said so).
  if ! nvidia-smi -L >/dev/null 2>&1; then
    no_gpu="sees no GPU (this loom was built without CUDA"
    "$loom" doctor 2>/dev/null | grep -q "CUDA compiled in" && no_gpu="sees no GPU (no GPU or no driver"
    expect_usage cuda_without_gpu "$no_gpu" -- train --config "$good" --nproc 2 --device cuda
    expect_usage cuda_without_gpu_one_rank "$no_gpu" -- train --config "$good" --device cuda
  fi
  expect_usage bf16_reduce_with_slim "compresses its exchange its own way" -- train \
    --config "$good" --nproc 2 --dp-mode slim --grad-reduce bf16
  expect_usage unknown_precision "one of" -- train --config "$good" --precision fp8
  expect_usage restarts_need_nproc "--max-restarts, --min-nproc and --stop-grace need --nproc" -- train \
    --config "$good" --max-restarts 1
  # Unwritable output folder: a path below a regular file can never be created.
  touch "$tmp/file"
  "$loom" train --config "$good" --nproc 2 --output.dir "$tmp/file/out" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]] && grep -q "output" "$tmp/stderr"; then
    echo "ok   unwritable_output: $(cat "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL unwritable_output: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # More ranks than cores (here: one core allowed) is a one-line warning; the run goes on.
  if command -v taskset >/dev/null; then
    taskset -c 0 "$loom" train --config "$good" --nproc 2 --comm gloo --steps 1 \
      --output.dir "$tmp/oversubscribed" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    if [[ $rc -eq 0 && $(grep -c "^loom: warning" "$tmp/stderr") -eq 1 ]] &&
       grep -q "^loom: warning: 2 ranks on 1 core;" "$tmp/stderr"; then
      echo "ok   oversubscribed: $(grep '^loom: warning' "$tmp/stderr")"; passes=$((passes + 1))
    else
      echo "FAIL oversubscribed: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
    fi
    # The same for one process whose compute threads outnumber the cores.
    taskset -c 0 "$loom" train --config "$good" --threads 2 --steps 1 \
      --output.dir "$tmp/oversubscribed-threads" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    if [[ $rc -eq 0 ]] &&
       grep -q "^loom: warning: 1 rank of 2 compute threads (train.threads) on 1 core;" "$tmp/stderr"; then
      echo "ok   oversubscribed_threads: $(grep '^loom: warning' "$tmp/stderr")"; passes=$((passes + 1))
    else
      echo "FAIL oversubscribed_threads: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
    fi
  fi
  # A thread count no machine has (100000 threads brought this one to a halt) is refused.
  expect_usage too_many_threads "train.threads must be in 1..1024" -- train --config "$good" \
    --nproc 2 --threads 100000
  expect_usage bad_nproc "--nproc" -- train --config "$good" --nproc zero
  expect_usage bad_comm "parallel.comm" -- train --config "$good" --nproc 2 --comm infiniband
  expect_usage nccl_on_cpu "add --device cuda" -- train --config "$good" --nproc 2 --comm nccl
  expect_command_usage schedule_unsupported "interleaved" -- schedule --schedule interleaved \
    --pp 2 --loops 2 --microbatches 3
  cluster="$(dirname "$0")/../../clusters/a100-80gb.toml"
  expect_command_usage rank_speed_count "one per pipeline rank" -- simulate --from-config "$good" \
    --pp 2 --cluster "$cluster" --rank-speed 1.2
  expect_command_usage rank_speed_value "--rank-speed" -- simulate --from-config "$good" \
    --pp 2 --cluster "$cluster" --rank-speed 1,-1
  expect_command_usage blocking_bfs "drop --blocking-p2p" -- simulate --model gpt --layers 8 --seq-len 64 \
    --width 64 --heads 2 --cluster "$cluster" --gpus 4 --pp 4 --global-batch 16 --schedule bfs \
    --loops 2 --blocking-p2p
  # One flag parser for every command (src/loom/flags): the same rules everywhere.
  sim=(simulate --model gpt --layers 2 --width 64 --heads 2 --cluster "$cluster" --gpus 1 --json)
  if "$loom" "${sim[@]}" --seq_len 16 >"$tmp/underscore" 2>"$tmp/stderr" &&
     "$loom" "${sim[@]}" --seq-len=16 >"$tmp/dash" 2>>"$tmp/stderr" &&
     cmp -s "$tmp/underscore" "$tmp/dash" && grep -q step_s "$tmp/dash"; then
    echo "ok   simulate_seq_len: --seq_len 16 reads as --seq-len=16"; passes=$((passes + 1))
  else
    echo "FAIL simulate_seq_len: --seq_len and --seq-len differ or fail"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  expect_command_usage simulate_unknown_flag \
    "unknown flag '--layer' for loom simulate; did you mean '--layers'?" -- simulate --layer 2 \
    --cluster "$cluster"
  expect_command_usage schedule_unknown_flag \
    "unknown flag '--microbatch' for loom schedule; did you mean '--microbatches'?" -- \
    schedule --pp 2 --microbatch 4
  expect_command_usage profile_unknown_flag \
    "unknown flag '--second' for loom profile; did you mean '--seconds'?" -- profile --second 1
  expect_command_usage launch_unknown_flag \
    "unknown flag '--nprocs' for loom launch; did you mean '--nproc'?" -- launch --nprocs 2 -- true
  # ".invalid" never resolves (RFC 6761); the timeout bounds a failure of this check.
  LOOM_COMM_TIMEOUT_S=10 expect_command_usage launch_unresolvable "'no-such.invalid' does not resolve" \
    -- launch --nnodes 2 --node-rank 1 --master-addr no-such.invalid --nproc 1 -- true
  expect_command_usage launch_missing_program \
    "cannot run 'no-such-program-x': no such program in PATH" -- launch --nproc 2 -- no-such-program-x
  printf 'data\n' >"$tmp/not-executable"
  expect_command_usage launch_not_executable "cannot run '$tmp/not-executable': not an executable" \
    -- launch --nproc 2 -- "$tmp/not-executable"
  expect_command_usage train_unknown_field "unknown flag '--layer' for loom train; did you mean '--layers'?" \
    -- train --config "$good" --layer 3
  expect_command_usage missing_value "flag --pp needs a value, e.g. --pp" -- schedule --pp
  expect_command_usage switch_value "flag --json takes no value" -- simulate --json=yes
  expect_command_usage stray_word "unexpected argument 'extra' for loom plan" -- plan extra
  help_fails=$fails
  for cmd in train launch schedule doctor simulate plan profile version; do
    for h in -h --help; do
      "$loom" $cmd $h >"$tmp/stdout" 2>"$tmp/stderr"
      rc=$?
      if ! [[ $rc -eq 0 && ! -s $tmp/stderr ]] || ! grep -q "^usage: loom $cmd" "$tmp/stdout"; then
        echo "FAIL help: loom $cmd $h: rc=$rc"; cat "$tmp/stdout" "$tmp/stderr"; fails=$((fails + 1))
      fi
    done
  done
  if [[ $fails -eq $help_fails ]]; then
    echo "ok   help: -h and --help on every command, exit 0"; passes=$((passes + 1))
  fi
  for v in --version version; do
    "$loom" $v >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    if [[ $rc -eq 0 ]] && grep -qE '^loom [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/stdout" &&
       grep -qE '^libtorch [0-9]+\.[0-9]+' "$tmp/stdout"; then
      echo "ok   $v: $(tr '\n' ' ' <"$tmp/stdout")"; passes=$((passes + 1))
    else
      echo "FAIL $v: rc=$rc"; cat "$tmp/stdout" "$tmp/stderr"; fails=$((fails + 1))
    fi
  done
elif [[ $mode == mpi ]]; then
  # Under mpirun: every rank sees the error, exactly one prints it, all exit 2.
  # expect_one_rank NAME ERROR_LINE_START -- TRAIN_FLAGS...
  expect_one_rank() {
    local name=$1 want=$2
    shift 3
    mpirun -n 2 --oversubscribe "$loom" train --config "$good" "$@" --output.dir "$tmp/o.$name" \
      >"$tmp/stdout" 2>"$tmp/stderr"
    local rc=$?
    local n
    n=$(grep -cF -- "loom: error: $want" "$tmp/stderr")
    if [[ $rc -ne 0 && $n -eq 1 && ! -e "$tmp/o.$name" ]]; then
      echo "ok   $name: rc=$rc, one error line"; passes=$((passes + 1))
    else
      echo "FAIL $name: rc=$rc, $n error lines"; cat "$tmp/stderr"; fails=$((fails + 1))
    fi
  }
  expect_one_rank mpirun_usage "model.layers" -- --layers 0
  # The same for a flag the parser rejects before the ranks meet.
  expect_one_rank mpirun_unknown_flag "unknown flag '--layer' for loom train" -- --layer 3
  # A rank that dies mid-run brings every rank down, non-zero, with a message naming it.
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 timeout 120 "$loom" train --config "$good" --nproc 3 \
    --global_batch 12 --steps 5 --output.dir "$tmp/o2" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  # (mpirun's banners are left out: launch/mpirun_stderr.h; loom names the rank from them.)
  if [[ $rc -ne 0 && $rc -ne 124 ]] &&
     grep -q "^loom: rank 1 was killed by signal 9 (Killed); mpirun stopped the other ranks$" "$tmp/stderr" &&
     ! grep -q -- "^-----\|mpirun noticed" "$tmp/stderr"; then
    echo "ok   rank_death: rc=$rc, $(grep '^loom: rank 1' "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL rank_death: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # An unexpected library error (a failed torch check) on one rank: one line naming the rank,
  # no C++ backtrace, every rank down.
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 LOOM_FAULT_KIND=torch-error timeout 120 "$loom" train \
    --config "$good" --nproc 2 --steps 5 --output.dir "$tmp/o4" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 124 ]] &&
     [[ $(grep -c "^\[rank 1\] loom: error: LOOM_FAULT_KIND=torch-error on rank 1 at step 1$" "$tmp/stderr") -eq 1 ]] &&
     ! grep -q "frame #\|Exception raised from\|MPI_ABORT was invoked" "$tmp/stderr"; then
    echo "ok   torch_error: rc=$rc, $(grep 'loom: error' "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL torch_error: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # A failure every rank reaches together (a NaN gradient with train.on_nan = stop): one line,
  # said once (every rank printed it), no banner, exit 1.
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 LOOM_FAULT_KIND=nan timeout 120 "$loom" train \
    --config "$good" --nproc 2 --steps 5 --output.dir "$tmp/o5" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -eq 1 && $(grep -c "error" "$tmp/stderr") -eq 1 ]] &&
     grep -q "^loom: error: step 2: the loss is .* and the gradient norm" "$tmp/stderr" &&
     ! grep -q -- "^-----\|ORTE_ERROR_LOG" "$tmp/stderr"; then
    echo "ok   agreed_nan: $(grep 'loom: error' "$tmp/stderr" | cut -c1-100)"; passes=$((passes + 1))
  else
    echo "FAIL agreed_nan: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # A hang turns into a timeout error naming the rank, communicator and operation.
  LOOM_COMM_TIMEOUT_S=3 LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 LOOM_FAULT_KIND=hang timeout 120 \
    "$loom" train --config "$good" --nproc 2 --steps 5 --output.dir "$tmp/o3" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "communication timeout" "$tmp/stderr" && grep -q "on communicator" "$tmp/stderr"; then
    echo "ok   hang_timeout: rc=$rc, $(grep -m1 'communication timeout' "$tmp/stderr" | cut -c1-160)"; passes=$((passes + 1))
  else
    echo "FAIL hang_timeout: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
else
  # loom's own launcher (--comm gloo): no MPI anywhere.
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 timeout 120 "$loom" train --config "$good" --nproc 3 \
    --comm gloo --global_batch 12 --steps 5 --output.dir "$tmp/g2" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "loom: rank 1 (pid [0-9]*) was killed by signal 9" "$tmp/stderr"; then
    echo "ok   launcher_rank_death: rc=$rc, $(grep 'loom: rank 1' "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL launcher_rank_death: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 LOOM_FAULT_KIND=torch-error timeout 120 "$loom" train \
    --config "$good" --nproc 2 --comm gloo --steps 5 --output.dir "$tmp/g5" >"$tmp/stdout" \
    2>"$tmp/stderr"
  rc=$?
  # (The other rank, whose all-reduce with it then fails, adds no line: the launcher stops it.)
  if [[ $rc -ne 0 && $rc -ne 124 && $(grep -c "loom: error" "$tmp/stderr") -eq 1 ]] &&
     grep -q "^\[rank 1\] loom: error: LOOM_FAULT_KIND=torch-error on rank 1 at step 1$" "$tmp/stderr" &&
     ! grep -q "frame #\|Exception raised from" "$tmp/stderr"; then
    echo "ok   launcher_torch_error: rc=$rc, $(grep 'loom: error' "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL launcher_torch_error: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 LOOM_FAULT_KIND=nan timeout 120 "$loom" train \
    --config "$good" --nproc 2 --comm gloo --steps 5 --output.dir "$tmp/g7" >"$tmp/stdout" \
    2>"$tmp/stderr"
  rc=$?
  if [[ $rc -eq 1 && $(grep -c "loom: error" "$tmp/stderr") -eq 1 ]] &&
     grep -q "^loom: error: step 2: the loss is .* and the gradient norm" "$tmp/stderr"; then
    echo "ok   launcher_agreed_nan: $(grep 'loom: error' "$tmp/stderr" | cut -c1-100)"; passes=$((passes + 1))
  else
    echo "FAIL launcher_agreed_nan: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # An allocation that fails: what it means, not "std::bad_alloc" alone.
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 LOOM_FAULT_KIND=out-of-memory timeout 120 "$loom" train \
    --config "$good" --nproc 2 --comm gloo --steps 5 --output.dir "$tmp/g6" >"$tmp/stdout" \
    2>"$tmp/stderr"
  rc=$?
  if [[ $rc -eq 1 && $(grep -c "loom: error" "$tmp/stderr") -eq 1 ]] &&
     grep -q "^\[rank 1\] loom: error: out of memory: an allocation failed (std::bad_alloc); lower" "$tmp/stderr"; then
    echo "ok   launcher_out_of_memory: $(grep 'loom: error' "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL launcher_out_of_memory: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  LOOM_COMM_TIMEOUT_S=3 LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=1 LOOM_FAULT_KIND=hang timeout 120 \
    "$loom" train --config "$good" --nproc 2 --comm gloo --steps 5 --output.dir "$tmp/g3" \
    >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "communication timeout" "$tmp/stderr" &&
     grep -q "on communicator" "$tmp/stderr" && grep -q "gloo" "$tmp/stderr"; then
    echo "ok   launcher_hang_timeout: rc=$rc, $(grep -m1 'communication timeout' "$tmp/stderr" | cut -c1-160)"; passes=$((passes + 1))
  else
    echo "FAIL launcher_hang_timeout: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # A rank that never starts (torchrun's environment by hand, rank 1 of 2 missing): one line
  # naming it, without c10d's warnings (before: "wait timeout after 3000ms, keys: /loom/0/1").
  LOOM_COMM_TIMEOUT_S=3 RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$((20000 + RANDOM % 20000)) timeout 120 "$loom" train --config "$good" \
    --output.dir "$tmp/g6" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -eq 1 && $(grep -c . "$tmp/stderr") -eq 1 ]] &&
     grep -q "\[rank 0\] rank 1 of WORLD_SIZE=2 did not join within 3 s" "$tmp/stderr"; then
    echo "ok   rank_never_started: $(cat "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL rank_never_started: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # A usage error found inside the ranks (here: --nproc disagrees with the launcher's ranks)
  # is one line from one rank.
  "$loom" launch --nproc 2 -- "$loom" train --config "$good" --nproc 3 --output.dir "$tmp/g4" \
    >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]] && grep -q "loom: error: --nproc 3" "$tmp/stderr"; then
    echo "ok   launcher_usage: $(cat "$tmp/stderr")"; passes=$((passes + 1))
  else
    echo "FAIL launcher_usage: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
  fi
  # torchrun starts loom's ranks as it starts Python ones (its store, its environment).
  torchrun="${LOOM_VENV:-$HOME/.local/share/loom/venv}/bin/torchrun"
  if [[ -x $torchrun ]]; then
    timeout 300 "$torchrun" --nproc-per-node 2 --no-python "$loom" train --config "$good" \
      --steps 3 --output.dir "$tmp/t1" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q '"step": 3' "$tmp/t1/metrics.jsonl" &&
       grep -q "comm gloo" "$tmp/stdout" "$tmp/stderr"; then
      echo "ok   torchrun: rc=0, 3 steps"; passes=$((passes + 1))
    else
      echo "FAIL torchrun: rc=$rc"; cat "$tmp/stderr"; fails=$((fails + 1))
    fi
  else
    echo "skip torchrun: $torchrun not found (scripts/install-deps.sh installs it)"
  fi
fi
echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]

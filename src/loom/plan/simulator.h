#pragma once
// Event-driven simulation of one training step over a LOWERED schedule (the action lists the
// executor runs, schedule/lower.h), with the costs of a CostModel.
//
// Each pipeline rank has one compute stream, one send link per peer rank and one data-parallel
// stream. The rank walks its list in order, like parallel/executor.cpp:
//   F / B / I / W   start when the compute stream is free, the input message has arrived (the
//                   RECV the lowering put before it) and, under zero3, the stage's UNSHARD has
//                   finished; they occupy the compute stream;
//   SEND_F / SEND_B issued when reached (after the compute that produced the tensor); the
//                   transfer starts when the link to that peer is free, and its arrival time
//                   is what the peer's compute waits for;
//   RECV_F / RECV_B markers (receives are posted ahead in the runtime);
//   UNSHARD         all-gather of the stage's parameters on the DP stream, issued when reached
//                   (lowering placed it early to prefetch);
//   REDUCE_GRAD     all-reduce (allreduce; quant: of its quantized message) or reduce-scatter
//                   (zero1/2/3) of the stage's gradients on the DP stream, overlapping the
//                   compute that follows (nothing for slim and diloco);
//   RESHARD         frees the gathered parameters.
// With SimOptions::blocking_p2p the SEND/RECV actions between two computes are one exchange
// that waits for both ends; with grad_reduce_after_flush the REDUCE_GRADs wait for the list's
// end (Megatron-LM of 2021, both).
// After its list a rank waits for its streams (the ranks of the first and the last stage then
// all-reduce a tied head's gradient: CostModel::tied_grad_bytes), runs the optimizer, under
// zero1/zero2 all-gathers the updated parameters, and under slim / diloco all-reduces what they
// meet on (CostModel::sync_bytes, a mean step's share). Step time = the latest rank.
// Every stream is FIFO in list order, so each action's times follow from earlier ones: the
// simulation advances every rank as far as its inputs are known and repeats (no tie-breaking).
// Data-parallel replicas and tensor-parallel ranks run the same lists with the same costs, so
// one pipeline (dp_rank 0, tp_rank 0) is simulated and collectives start when issued.
// On shared cores (CostModel::shared_cores() > 0: a CPU machine) a compute action's duration
// depends on how many ranks compute meanwhile (plan/core_sharing.h): the run loop then also
// advances a processor-sharing clock to the next compute end whenever no rank can go on. The
// optimizer step is compute too. The replicas stay in lock-step (real ones drift apart and fill
// each other's bubbles when ranks outnumber cores).
//
// Memory, per rank, over time: static parameters, gradients and optimizer state of its stages;
// plus gathered parameters (UNSHARD..RESHARD), full gradient buffers (first backward ..
// REDUCE_GRAD done), stored activations (F start .. B or W end) and the transient working set of
// a backward. The peak and its breakdown are reported.
//
// A second run with communication free (FreeCommModel) separates the pipeline bubble from
// exposed communication: exposed = step - step with free communication.
#include <string>
#include <vector>

#include "loom/plan/cost_model.h"
#include "loom/plan/parallel.h"
#include "loom/schedule/schedule.h"
#include "loom/schedule/timing.h"

namespace loom::plan {

struct SimOptions {
  Mesh mesh;
  DpMode dp_mode = DpMode::AllReduce;
  bool split_exposed = true;  // run the free-communication pass
  bool timeline = true;       // keep every event
  // zero1/zero2: > 0 = the parameter all-gather after the optimizer overlaps the next step's
  // forward bucket by bucket; only the first bucket of this many bytes is waited for.
  double param_gather_bucket_bytes = 0;
  // Pipeline messages in batched exchanges that wait for both ends (Megatron-LM's 2021
  // p2p_communication): a run of consecutive SEND/RECV actions in a list is one exchange; the
  // rank posts its receives on reaching it, a transfer starts once the receiver has posted its
  // receive, and the rank goes on when all have completed (blocking_exchanges.h places them as
  // that code does). Default: sends overlap the compute and need no posted receive.
  bool blocking_p2p = false;
  // The gradient reductions start after the rank's last action, one after another (Megatron-LM
  // of 2021 all-reduces after the pipeline flush); default: each when its stage's last
  // backward is done, behind the compute that follows.
  bool grad_reduce_after_flush = false;
  // A checkpoint written in the background (output.async_save): each rank holds a copy of its
  // state (StageMemory::saved) while the next steps train, in host memory. On a shared (CPU)
  // cluster the host's memory is the device's: it counts in the peak (MemoryBreakdown::
  // snapshot); on devices of their own it is reported apart (RankResult::host_snapshot).
  enum class Snapshot { None, Device, Host };
  Snapshot async_save = Snapshot::None;
};

enum class Stream { Compute = 0, Send = 1, Dp = 2 };

struct SimEvent {
  std::string name;  // "2F0", "2SEND_F0", "1REDUCE_GRAD", "optimizer"
  std::string cat;   // kind name
  Stream stream = Stream::Compute;
  double start = 0, end = 0;
};

struct MemoryBreakdown {
  double params = 0;  // incl. gathered parameters
  double grads = 0;   // incl. full gradient buffers
  double optimizer = 0;
  double activations = 0;  // kept from forwards to their backwards
  double working = 0;      // transient inside a backward (recomputed layer, logits)
  double snapshot = 0;     // an async save's copy of the state, where it is device memory
  double total() const { return params + grads + optimizer + activations + working + snapshot; }
};

struct RankResult {
  double compute_s = 0;  // busy time of the compute stream (with tensor-parallel comm)
  double tp_comm_s = 0;  // of which tensor-parallel communication
  double p2p_s = 0;      // busy time of the send links
  double dp_s = 0;       // busy time of the DP stream
  double optimizer_s = 0;
  double end_s = 0;          // step end on this rank
  double p2p_bytes = 0;      // sent by this rank
  double dp_bytes = 0;       // sent by this rank (ring traffic)
  MemoryBreakdown peak;      // at the moment of the peak total
  int peak_inflight = 0;     // stored (stage, micro-batch) activations at that moment
  double peak_kept = 0;      // the most kept activations at any moment (the runtime's
                             // peak_activation_bytes measures the same)
  double host_snapshot = 0;  // host memory of an async save's copy (SimOptions::async_save)
  std::vector<SimEvent> events;
};

struct SimResult {
  std::string schedule_name;
  double step_s = 0;
  double ideal_step_s = 0;     // same schedule, communication free
  double bubble_fraction = 0;  // idle share of the compute streams with free communication
  double exposed_comm_s = 0;   // step_s - ideal_step_s
  std::vector<RankResult> ranks;

  double peak_memory() const;
  int peak_rank() const;
  // Compute actions in milliseconds, for schedule::render_svg(schedule, timing, " ms").
  schedule::Timing timing() const;
};

// Throws loom::UsageError when the schedule cannot finish (deadlock) or does not fit the model.
SimResult simulate(const schedule::Schedule& lowered, const CostModel& cost,
                   const SimOptions& opts);

// Chrome trace JSON: one process per pipeline rank, threads compute / send / dp; microseconds.
std::string sim_trace_json(const SimResult& r);

}  // namespace loom::plan

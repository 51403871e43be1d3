#pragma once
// A cluster description: what the cost model needs to know about the hardware. Read from TOML
// files shipped in clusters/ (a100-80gb.toml, h100-80gb.toml) or written by `loom profile`
// (this machine). Format, every key required unless marked optional:
//
//   name = "a100-80gb"
//   note = "..."                       # optional: provenance, calibration
//   [node]
//   devices = 8                        # accelerators (or CPU cores) per node
//   shared = false                     # optional: the ranks share the node's `devices` (CPU
//                                      # cores): block times are times alone, and the
//                                      # simulator shares the cores among computing ranks
//   cpu = "Intel(R) Xeon(R) ..."       # optional: /proc/cpuinfo's model name where it was
//                                      # profiled; another processor gets a warning
//   oversubscribed = 1.6               # optional (1, shared nodes): a rank's time when ranks
//                                      # outnumber the cores, over its fair share (C/n) of them
//                                      # (loom profile: 2C ranks on C cores)
//   runtime_cpu = 1.12                 # optional (1, shared nodes): the CPU a run's ranks use
//                                      # per second of their F/B/I/W (the communication
//                                      # engines' polling and copies, the step's bookkeeping),
//                                      # which competes with the compute when ranks outnumber
//                                      # the cores (loom profile: a short run on two ranks)
//   [device]
//   memory_gb = 80                     # capacity per device (GB = 1e9 bytes)
//   memory_bandwidth_gbs = 2039        # GB/s
//   precision = "bf16"                 # default compute precision (a key of peak_tflops)
//   peak_tflops = { bf16 = 312.0, fp32 = 19.5 }
//   [efficiency]
//   gemm_size = [512, 1024, ...]       # d = cbrt(M*N*K) of a matrix product
//   gemm = [0.35, 0.55, ...]           # fraction of peak at that size (log2-interpolated)
//   gemm_in_training = 0.76            # optional (1): share of the curve's rate the products
//                                      # of a training step reach (the curve: kernels alone;
//                                      # up to 2, the fraction of peak capped at 1)
//   elementwise = 0.8                  # fraction of memory bandwidth for elementwise kernels
//                                      # (a large copy: what `loom profile --device` measures)
//   elementwise_in_training = 0.46     # optional (1): share of that rate a training step's
//                                      # memory-bound kernels reach over the bytes the cost
//                                      # model counts (casts, layouts and reductions included)
//   calibrated = "..."                 # optional: which points were fitted, to what
//   attention_forward = 0.6            # optional: fraction of peak a flash-attention kernel
//   attention_backward = 0.5           # reaches (forward; backward incl. its recompute);
//                                      # absent: the GEMM curve at the kernel's size
//   attention_head_size = [64, 128]    # optional, with arrays above (as many values): the
//   attention_seq_len = [1024, 4096]   # shape of each measured kernel; a model takes the one
//                                      # nearest its own (log2 of head size and sequence)
//   tp_overlap = 0.9                   # optional (0): share of a tensor-parallel collective
//                                      # that --tp-comm-overlap hides under the GEMM next to it
//   [intra]                            # link between devices of a node, per device/direction
//   bandwidth_gbs = 300
//   efficiency = 0.8                   # optional (1): share of bandwidth collectives reach
//   latency_us = 5
//   [inter]                            # network between nodes, per device/direction
//   ...same keys...
//   [[block]]                          # optional: measured block times (loom profile)
//   kind = "layer"                     # embedding | layer | head (head includes the loss)
//   width = 128, seq_len = 64, heads = 4, vocab = 256, micro_batch = 8
//   tp = 2                             # optional (1): a tensor-parallel shard, compute only
//   forward_ms = 1.0
//   backward_ms = 2.0
//   activation_mb = 4.5                # optional: bytes the forward keeps for the backward
//   loaded_slowdown = 1.8              # optional (1): forward + backward time with every core
//                                      # computing / time alone (shared nodes)
//   action_ms = 0.5                    # optional (0), a layer: what one compute action (F, B,
//                                      # I or W of a stage) costs beyond its blocks' times,
//                                      # added once per action (loom profile: a stack of
//                                      # layers as one-layer actions against one per
//                                      # micro-batch; profile/action_cost.h)
//   [optimizer]                        # optional (measured): AdamW step cost
//   ns_per_param = 3.0
#include <map>
#include <string>
#include <vector>

namespace loom::plan {

struct Link {
  double bandwidth = 0;   // bytes/s per device and direction, before efficiency
  double efficiency = 1;  // share of `bandwidth` that transfers reach
  double latency = 0;     // seconds per message (per ring step for collectives)
  double effective_bandwidth() const { return bandwidth * efficiency; }
};

// Measured time of one model block on this machine (loom profile).
struct BlockProfile {
  std::string kind;  // embedding | layer | head
  int64_t width = 0, seq_len = 0, heads = 0, vocab = 0, micro_batch = 0;
  double forward_s = 0;
  double backward_s = 0;
  // The backward split as the runtime's I/W actions run it (input gradient with the graph
  // retained, then weight gradients through it); 0 = not measured: I = W = backward / 2.
  double input_s = 0, weight_s = 0;
  double activation_bytes = 0;  // 0 = not measured
  double loaded_slowdown = 1;   // time with every core computing / time alone
  // This rank's share of the block under tensor parallelism of degree tp (its compute only:
  // the profile runs it with a group in which nothing moves; the collectives are modelled).
  int64_t tp = 1;
  std::string model = "gpt";            // gpt | llama: whose block
  int64_t kv_heads = 0, ffn_width = 0;  // llama: key/value heads and SwiGLU units (gpt: 0)
  double action_s = 0;                  // a layer: what a compute action costs beyond its blocks
};

// A fused attention kernel measured at one shape: fractions of peak for the forward and the
// backward (its recompute included), 0 = the GEMM curve. A shape of 0 x 0 stands for any shape.
struct AttentionKernel {
  double head_size = 0, seq_len = 0;
  double forward = 0, backward = 0;
};

struct Cluster {
  std::string name;
  std::string note;
  std::string origin;  // file it came from
  int devices_per_node = 1;
  bool shared = false;
  double memory_bytes = 0;
  double memory_bandwidth = 0;               // bytes/s
  std::string precision;                     // default precision, a key of peak_flops
  std::map<std::string, double> peak_flops;  // FLOP/s by precision
  std::vector<double> gemm_size, gemm_efficiency;
  double gemm_in_training = 1;  // scales the curve (kernels alone) to a training step's products
  double elementwise_efficiency = 1;
  double elementwise_in_training = 1;  // scales the copy's rate to a training step's kernels
  std::string calibrated;
  std::vector<AttentionKernel> attention;  // empty = the GEMM curve
  double tp_overlap = 0;
  std::string cpu;            // where a shared (CPU) cluster was profiled
  double oversubscribed = 1;  // shared nodes: slowdown beyond the fair share of the cores
  double runtime_cpu = 1;     // shared nodes: a run's CPU per second of its compute
  Link intra, inter;
  std::vector<BlockProfile> blocks;
  double optimizer_s_per_param = 0;  // 0 = not measured (analytic memory-bound estimate)

  // Fraction of peak reached by a matrix product of size d = cbrt(M*N*K).
  double gemm_fraction(double d) const;
  // The measured attention kernel whose shape is nearest (log2 of head size plus log2 of
  // sequence) to this one; nullptr when none was measured.
  const AttentionKernel* attention_kernel(double head_size, double seq_len) const;
  // Peak FLOP/s for a precision; throws UsageError naming the precisions the file lists.
  double peak(const std::string& precision) const;
};

// /proc/cpuinfo's first "model name", or "" when unknown.
std::string this_cpu();
// One line when `c` was profiled on another processor than this one, else "".
std::string other_cpu_warning(const Cluster& c);

// Throw loom::UsageError with one line naming the file, the key and what it must be.
Cluster load_cluster(const std::string& path);
Cluster parse_cluster(const std::string& text, const std::string& origin);
std::string to_toml(const Cluster& c);

}  // namespace loom::plan

#pragma once
// `loom profile --device cuda`: what one GPU reaches, measured, over a cluster file that holds
// what a single GPU cannot measure (its specification: peak FLOP/s and memory bandwidth, the
// node, the links; clusters/h200.toml says where each number comes from).
//   gemm         square products n x n x n in bf16, n = 256 .. 8192: 2 n^3 FLOPs over the
//                base's bf16 peak, the efficiency curve by size;
//   elementwise  a copy of 512 MiB: bytes read and written over the base's memory bandwidth;
//   attention    the fused causal kernel (scaled_dot_product_attention, bf16, width 4096,
//                16384 tokens) at heads of 64 and 128 and sequences of 1024 and 4096, its
//                FLOPs as the simulator counts them: forward 0.5 * 4 b s^2 h (the causal
//                half), backward 2.5 times that;
//   optimizer    loom's AdamW step on the GPU, per fp32 parameter.
#include <string>
#include <vector>

#include "loom/plan/cluster.h"

namespace loom::profile {

struct AttentionTiming {
  double head_size = 0, seq_len = 0;
  double flops = 0;  // the forward's, as the simulator counts them
  double forward_s = 0, backward_s = 0;
};

struct DeviceMeasurements {
  std::string device;                      // the GPU's model name
  std::vector<double> gemm_size, gemm_s;   // n and the seconds of one n x n x n product
  double copy_bytes = 0, copy_s = 0;       // bytes read + written by one copy, its seconds
  std::vector<AttentionTiming> attention;  // one per shape
  double optimizer_s_per_param = 0;
};

// Throws UsageError naming the fix when this process sees no GPU.
void require_gpu();

// Times the above on CUDA device 0 (each for about `seconds`); require_gpu() first.
DeviceMeasurements measure_cuda(double seconds);

// `base` with its gemm curve, elementwise and attention efficiencies and optimizer cost
// replaced by the measured ones (bf16), and a note and `calibrated` line saying what was
// measured where and when. Throws UsageError when a measurement exceeds the base's
// specification (its peak or bandwidth is then wrong).
plan::Cluster device_cluster(plan::Cluster base, const DeviceMeasurements& m,
                             const std::string& date);

}  // namespace loom::profile

#pragma once
// A short text sample from the model while it trains (output.sample_every), whatever its layout:
// each new token is one pipelined forward of every rank (Executor::run_forward, as evaluation
// runs it), the rank with the last stage of replica 0 picks the token (its tensor-parallel group
// gathers the vocabulary first) and tells everybody; rank 0 returns the text.
#include <cstdint>
#include <string>

#include "loom/comm/world.h"
#include "loom/config/config.h"
#include "loom/parallel/executor.h"

namespace loom::train {

struct SampleContext {
  const config::Config* cfg;
  comm::Backend* world;
  const comm::Mesh* mesh;
  parallel::Executor* exec;
  int m = 1;                 // micro-batches the executor runs per forward
  int64_t micro_batch = 1;   // samples per micro-batch
  bool first_stage = false;  // this rank feeds tokens
  bool last_stage = false;   // this rank gets logits
  torch::Device device = torch::kCPU;
};

// Collective over the world. Returns the prompt and its continuation on world rank 0, "" on
// the others.
std::string sample_text(const SampleContext& c, int64_t step);

}  // namespace loom::train

#pragma once
// The tiny training configuration the multi-rank tests start from: a 3-layer GPT of width 32
// (or the default MLP or CNN), 512 synthetic samples, 5 steps of 16, one evaluation batch, no
// final evaluation of the whole test split (a third of a pipeline test case's time; the
// evaluation tests turn it on), no progress bar. Each test sets the optimizer and whatever
// else it varies.
#include <string>

#include "loom/config/config.h"

namespace loom::test {

inline config::Config tiny_config(const std::string& kind) {
  config::Config c;
  c.model.kind = *config::parse_choice<config::ModelKind>(kind);
  if (kind == "gpt") {
    c.model.layers = 3;
    c.model.width = 32;
    c.model.heads = 2;
    c.model.seq_len = 16;
  }
  c.data.kind = config::DataKind::Synthetic;
  c.data.synthetic_size = 512;
  c.train.steps = 5;
  c.train.global_batch = 16;
  c.train.eval_batches = 1;
  c.train.final_eval = false;
  c.output.progress = false;
  c.output.overwrite = true;  // the tests train into the same folders again and again
  return c;
}

// The layout of a test run: dp x pp x tp ranks, `loops` stages per pipeline rank, a schedule
// and a dp-mode by name, and `microbatches` per replica and step.
inline void set_layout(config::Config& c, int dp, int pp, int tp, int loops, const char* schedule,
                       const char* mode, int64_t microbatches) {
  c.parallel.dp = dp;
  c.parallel.pp = pp;
  c.parallel.tp = tp;
  c.parallel.loops = loops;
  c.parallel.schedule = schedule;
  c.parallel.dp_mode = *config::parse_choice<config::DpMode>(mode);
  c.train.microbatches = microbatches;
}

}  // namespace loom::test

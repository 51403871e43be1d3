#pragma once
// What the rest of loom needs to know about a model before building it, in one table per
// model kind (spec.cpp): how many blocks it is cut into, what one sample of input looks like,
// whether it classifies. No libtorch here: preflight, the planner and the data feed read it.
#include <cstdint>
#include <vector>

#include "loom/config/config.h"

namespace loom::model {

struct ModelSpec {
  int blocks = 0;                     // pipeline-cuttable blocks (model::build makes as many)
  std::vector<int64_t> sample_shape;  // one sample of input: {seq_len} or {1, 28, 28}
  bool token_input = false;           // int64 token ids; otherwise float32 values
  bool classifier = false;            // one label per sample (accuracy is reported)
  config::DataKind data = config::DataKind::Synthetic;  // the real data set it trains on

  // Shape of a micro-batch of `micro_batch` samples.
  std::vector<int64_t> batch_shape(int64_t micro_batch) const;
};

ModelSpec spec_of(const config::ModelConfig& m);

}  // namespace loom::model

#pragma once
// What loom simulate and loom plan read: the model, the cluster and the layout, from flags or
// from a `loom train` configuration (--from-config).
#include <vector>

#include "loom/config/config.h"
#include "loom/flags/flags.h"
#include "loom/plan/cluster.h"
#include "loom/plan/parallel.h"
#include "loom/plan/transformer.h"

namespace loom::cli {

// The model and cluster flags (--model, --layers, ..., --cluster, --megatron) before `own`.
std::vector<flags::Flag> with_model_flags(std::vector<flags::Flag> own);

// The transformer the model flags describe (--layers, --width, --heads, --seq-len required).
plan::Transformer model_from_flags(const flags::Parsed& a);

// The --cluster file; warns (one line) when it was profiled on another processor.
plan::Cluster cluster_from_flags(const flags::Parsed& a);

// The layout flags on top of `p` (from a configuration file or the defaults). Without a file
// (`from_config` false), also the device count and the batch: dp from --gpus, and the one of
// --global-batch, --microbatches, --micro-batch-size that is missing from the other two.
void apply_parallel_flags(const flags::Parsed& a, plan::Parallel& p, bool from_config);

// The `loom train` configuration of --from-config with the model flags given on top.
config::Config config_with_model_flags(const flags::Parsed& a);

// A `loom train` configuration (--from-config, with the flags given on top) resolved as the
// trainer resolves it: the model, the layout and the trainer's own model cut.
void from_config(const flags::Parsed& a, plan::Transformer* m, plan::Parallel* p,
                 std::vector<int>* cut);

}  // namespace loom::cli

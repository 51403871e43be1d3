#include "loom/train/data_feed.h"

#include <algorithm>

#include "loom/model/spec.h"
#include "loom/train/preflight.h"

namespace loom::train {
namespace {

// The array as a tensor on `device`. A GPU's copy leaves from pinned memory without waiting:
// a pageable one would hold the host until the GPU had finished the previous step's work
// (its optimizer step), so the next step's first kernels would be launched only then.
torch::Tensor to_device(const data::Array& a, const torch::Device& device) {
  const torch::Tensor view =
      a.type == data::ElemType::Int64
          ? torch::from_blob(const_cast<int64_t*>(a.i64.data()), a.shape, torch::kInt64)
          : torch::from_blob(const_cast<float*>(a.f32.data()), a.shape, torch::kFloat32);
  if (!device.is_cuda()) return view.to(device, /*non_blocking=*/false, /*copy=*/true);
  return view.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace

std::unique_ptr<data::Dataset> open_dataset(const config::Config& cfg, data::Split split) {
  const std::string path = default_data_path(cfg);
  if (cfg.data.kind == config::DataKind::FashionMnist) return data::open_idx_images(path, split);
  if (cfg.data.kind == config::DataKind::Text)
    return data::open_text(path, cfg.model.seq_len, split, cfg.data.test_fraction,
                           cfg.data.tokenizer);
  uint64_t seed = cfg.train.seed + (split == data::Split::Test ? 7919 : 0);
  int64_t n = split == data::Split::Test ? std::max<int64_t>(1, cfg.data.synthetic_size / 10)
                                         : cfg.data.synthetic_size;
  const model::ModelSpec spec = model::spec_of(cfg.model);
  if (spec.token_input) return data::synthetic_tokens(cfg.model.vocab, cfg.model.seq_len, n, seed);
  return data::synthetic_classification(spec.sample_shape, cfg.model.classes, n, seed);
}

DataFeed::DataFeed(const config::Config& cfg, int dp, int dp_rank, int m, bool needs_inputs,
                   bool needs_targets, torch::Device device)
    : global_batch_(cfg.train.global_batch),
      dp_(dp),
      dp_rank_(dp_rank),
      m_(m),
      needs_inputs_(needs_inputs),
      needs_targets_(needs_targets),
      device_(device),
      train_set_(open_dataset(cfg, data::Split::Train)),
      eval_set_(open_dataset(cfg, data::Split::Test)) {
  train_sampler_ = std::make_unique<data::Sampler>(train_set_->size(), cfg.train.seed, true);
  eval_sampler_ = std::make_unique<data::Sampler>(eval_set_->size(), cfg.train.seed, false);
}

int64_t DataFeed::eval_real_samples(int64_t batch, int j) const {
  const int64_t b = global_batch_ / (int64_t{dp_} * m_);
  const int64_t first = batch * global_batch_ + (int64_t{dp_rank_} * m_ + j) * b;
  return std::clamp<int64_t>(eval_set_->size() - first, 0, b);
}

void DataFeed::fill(data::Dataset& ds, data::Sampler& smp, int64_t step, MicroBatches* out) {
  out->inputs.clear();
  out->targets.clear();
  if (!needs_inputs_ && !needs_targets_) return;
  for (int j = 0; j < m_; ++j) {
    auto idx = smp.microbatch(step, global_batch_, dp_, dp_rank_, m_, j);
    data::Batch b = ds.get(idx);
    out->inputs.push_back(needs_inputs_ ? to_device(b.input, device_) : torch::Tensor());
    out->targets.push_back(needs_targets_ ? to_device(b.target, device_) : torch::Tensor());
  }
}

}  // namespace loom::train

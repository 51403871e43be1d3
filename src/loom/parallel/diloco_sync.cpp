#include "loom/parallel/diloco_sync.h"

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

// Whole slots in order, cut where the running size first reaches k/n of the total (at most
// one fragment per non-empty slot).
std::vector<DilocoSync::Fragment> cut_fragments(const FlatLayout& layout, int64_t wanted,
                                                int64_t inner_steps) {
  std::vector<int64_t> ends;
  for (const auto& s : layout.slots)
    if (s.numel > 0) ends.push_back(s.offset + s.numel);
  const int64_t n = std::max<int64_t>(1, std::min<int64_t>(wanted, int64_t(ends.size())));
  std::vector<DilocoSync::Fragment> out;
  int64_t begin = 0;
  for (size_t i = 0; i < ends.size() && int64_t(out.size()) < n - 1; ++i) {
    const int64_t k = int64_t(out.size()) + 1;  // the cut being looked for
    const bool reached = ends[i] * n >= layout.numel * k;
    const bool must = int64_t(ends.size() - i) == n - k + 1;  // one slot left per fragment
    if (reached || must) {
      out.push_back({begin, ends[i] - begin, 0});
      begin = ends[i];
    }
  }
  out.push_back({begin, layout.numel - begin, 0});
  for (size_t f = 0; f < out.size(); ++f) out[f].offset = int64_t(f) * inner_steps / n;
  return out;
}

}  // namespace

DilocoSync::DilocoSync(const SyncContext& ctx)
    : DataParallel(ctx, BufferOptions{}),
      cfg_(ctx.cfg->diloco),
      streaming_(ctx.cfg->parallel.dp_mode == config::DpMode::StreamingDiloco) {
  global_ = buffer_.params().detach().clone();  // every replica built the same parameters
  momentum_ = torch::zeros_like(global_);
  delta_ = torch::zeros_like(global_);
  if (streaming_) {
    outer_bits_ = static_cast<int>(cfg_.outer_bits);
    overlap_ = cfg_.overlap;
  }
  fragments_ = cut_fragments(buffer_.layout(), streaming_ ? cfg_.fragments : 1, cfg_.inner_steps);
  exchanges_.resize(fragments_.size());
  if (outer_bits_ < 32 && dp_->size() > 1) {
    quant::Format fmt;
    fmt.bits = outer_bits_;
    for (size_t f = 0; f < fragments_.size(); ++f) {
      exchanges_[f].quantized = std::make_unique<QuantizedMean>(*dp_, fragments_[f].length, fmt);
      exchanges_[f].host.assign(exchanges_[f].quantized->padded(), 0.0f);
    }
  }
}

void DilocoSync::after_step() {
  buffer_.zero_grads();  // the trainer's optimizer has made the replica's own step
  ++steps_;
  outer_ = 0;
  const comm::Stats before = dp_->stats();
  for (size_t f = 0; f < fragments_.size(); ++f)
    if (exchanges_[f].due == steps_) apply(f);
  for (size_t f = 0; f < fragments_.size(); ++f)
    if (steps_ >= fragments_[f].offset && (steps_ - fragments_[f].offset) % cfg_.inner_steps == 0)
      start(f);
  bytes_ = double((dp_->stats() - before).total_bytes());
}

void DilocoSync::start(size_t f) {
  torch::NoGradGuard no_grad;
  const Fragment& fr = fragments_[f];
  Exchange& x = exchanges_[f];
  LOOM_CHECK(x.due < 0, "diloco fragment ", f, " of stage ", stage_->index(),
             " meets again before its last exchange was applied");
  torch::Tensor delta = delta_.narrow(0, fr.begin, fr.length);
  delta.copy_(global_.narrow(0, fr.begin, fr.length) -
              buffer_.params().narrow(0, fr.begin, fr.length));
  x.due = steps_ + overlap_;
  x.received = dp_->size() == 1;  // a lone replica's mean is its own
  if (!x.received) {
    if (x.quantized) {
      auto host = torch::from_blob(x.host.data(), {fr.length}, torch::kFloat32);
      host.copy_(delta);  // from the device, if on one; the padding stays 0
      x.quantized->start(x.host.data());
    } else {
      x.work = dp_->all_reduce(delta);
    }
  }
  if (overlap_ == 0) apply(f);
}

double DilocoSync::receive(size_t f) const {
  Exchange& x = exchanges_[f];
  if (x.received) return 0;
  const Fragment& fr = fragments_[f];
  torch::Tensor delta = delta_.narrow(0, fr.begin, fr.length);
  double waited = 0;
  if (x.quantized) {
    x.quantized->finish(x.host.data());
    waited = x.quantized->waited_s();
    delta.copy_(torch::from_blob(x.host.data(), {fr.length}, torch::kFloat32));
  } else {
    x.work->wait();
    waited = x.work->waited_s();
    x.work.reset();
    delta.div_(dp_->size());
  }
  x.received = true;
  return waited;
}

void DilocoSync::apply(size_t f) {
  torch::NoGradGuard no_grad;
  exposed_s_ += receive(f);
  const Fragment& fr = fragments_[f];
  torch::Tensor delta = delta_.narrow(0, fr.begin, fr.length);
  torch::Tensor g = global_.narrow(0, fr.begin, fr.length);
  torch::Tensor w = buffer_.params().narrow(0, fr.begin, fr.length);
  const double mu = cfg_.outer_momentum;
  if (mu > 0) {
    torch::Tensor m = momentum_.narrow(0, fr.begin, fr.length);
    m.mul_(mu).add_(delta);
    g.sub_(cfg_.nesterov ? delta.add(m, mu) : m, cfg_.outer_lr);
  } else {
    g.sub_(delta, cfg_.outer_lr);
  }
  // Without overlap the replica has not moved since it sent its delta: it takes g.
  if (overlap_ > 0)
    w.mul_(cfg_.mix).add_(g, 1 - cfg_.mix);
  else
    w.copy_(g);
  exchanges_[f].due = -1;
  exchanges_[f].received = false;
  outer_ += double(fr.length) / double(buffer_.layout().numel);
}

MemoryBytes DilocoSync::memory() const {
  MemoryBytes m = buffer_.memory();  // the replica's parameters and gradients
  m.params += global_.numel() * 4;   // g
  m.grads += delta_.numel() * 4;     // outer gradients
  for (const auto& x : exchanges_)
    if (x.quantized) m.grads += x.quantized->buffer_bytes() + int64_t(x.host.size()) * 4;
  m.optimizer = momentum_.numel() * 4;  // the outer momentum (the inner optimizer: the trainer)
  return m;
}

void DilocoSync::save(ChunkWriter& w) const {
  const torch::Tensor g = global_.cpu(), m = momentum_.cpu();
  put_flat(w, "diloco.global", -1, g.data_ptr<float>());
  put_flat(w, "diloco.momentum", -1, m.data_ptr<float>());
  w.put("diloco.steps", -1, 0, {1}, torch::tensor({steps_}, torch::kInt64));
  if (!streaming_) return;
  std::vector<int64_t> due;
  for (size_t f = 0; f < fragments_.size(); ++f) {
    if (exchanges_[f].due >= 0) receive(f);
    due.push_back(exchanges_[f].due);
  }
  const torch::Tensor d = delta_.cpu();
  put_flat(w, "diloco.pending", -1, d.data_ptr<float>());
  w.put("diloco.fragments", -1, 0, {1}, torch::tensor({int64_t(due.size())}, torch::kInt64));
  w.put("diloco.due", -1, 0, {int64_t(due.size())}, torch::tensor(due, torch::kInt64));
}

void DilocoSync::load(const ChunkReader& r) {
  torch::Tensor g = torch::empty({global_.numel()}, torch::kFloat32);
  fresh_ = !get_flat(r, "diloco.global", -1, g.data_ptr<float>());
  if (fresh_) return;  // another mode's checkpoint: after_load() starts afresh
  torch::Tensor m = torch::empty_like(g), steps = torch::zeros({1}, torch::kInt64);
  if (!get_flat(r, "diloco.momentum", -1, m.data_ptr<float>()) ||
      !r.get("diloco.steps", -1, 0, steps))
    LOOM_USAGE(
        "checkpoint holds diloco.global but not diloco.momentum or diloco.steps; it is "
        "incomplete");
  global_.copy_(g);
  momentum_.copy_(m);
  steps_ = steps.item<int64_t>();
  for (auto& x : exchanges_) x.due = -1;
  torch::Tensor count = torch::zeros({1}, torch::kInt64);
  if (!streaming_ || !r.get("diloco.fragments", -1, 0, count)) return;
  torch::Tensor due = torch::empty({count.item<int64_t>()}, torch::kInt64);
  if (!r.get("diloco.due", -1, 0, due))
    LOOM_USAGE("checkpoint holds diloco.fragments but not diloco.due; it is incomplete");
  if (due.max().item<int64_t>() < 0) return;  // nothing in flight
  if (due.numel() != int64_t(fragments_.size()))
    LOOM_USAGE("checkpoint has streaming-diloco exchanges in flight for ", due.numel(),
               " fragments, this run cuts the stage into ", fragments_.size(),
               "; resume with the checkpoint's diloco.fragments");
  torch::Tensor pending = torch::zeros_like(g);
  if (!get_flat(r, "diloco.pending", -1, pending.data_ptr<float>()))
    LOOM_USAGE("checkpoint holds diloco.due but not diloco.pending; it is incomplete");
  delta_.copy_(pending);
  for (size_t f = 0; f < fragments_.size(); ++f) {
    exchanges_[f].due = due[int64_t(f)].item<int64_t>();
    exchanges_[f].received = exchanges_[f].due >= 0;
  }
}

void DilocoSync::after_load() {
  if (!fresh_) return;
  global_.copy_(buffer_.params());
  momentum_.zero_();
  steps_ = 0;
  for (auto& x : exchanges_) x.due = -1;
}

void DilocoSync::end_of_run() {
  torch::NoGradGuard no_grad;
  for (size_t f = 0; f < fragments_.size(); ++f)
    if (exchanges_[f].due >= 0) apply(f);
  const torch::Tensor& w = buffer_.params();
  if (dp_->size() > 1) {
    comm::WorkPtr work = dp_->all_reduce(w);
    work->wait();
    exposed_s_ += work->waited_s();
    w.div_(dp_->size());
  }
  global_.copy_(w);
}

std::vector<std::pair<std::string, double>> DilocoSync::step_metrics() const {
  return {{"diloco_bytes", bytes_}, {"diloco_outer", outer_}};
}

}  // namespace loom::parallel

#include "loom/parallel/executor.h"

#include <ATen/record_function.h>

#include <chrono>

#include "loom/common/cpu_time.h"
#include "loom/common/error.h"
#include "loom/schedule/send_order.h"

namespace loom::parallel {
namespace {

using schedule::Kind;

}  // namespace

Executor::Executor(const schedule::Schedule& lowered, int pp_rank, comm::Backend& pp_comm,
                   std::map<int, Stage*> stages, std::map<int, DpHooks*> hooks,
                   std::vector<ActivationSpec> boundary)
    : actions_(lowered.ranks.at(pp_rank)),
      shape_(lowered.shape),
      pp_rank_(pp_rank),
      pp_(pp_comm),
      stages_(std::move(stages)),
      hooks_(std::move(hooks)),
      boundary_(std::move(boundary)) {
  for (size_t i = 0; i < actions_.size(); ++i) {
    const auto& a = actions_[i];
    LOOM_CHECK(shape_.rank_of(a.stage) == pp_rank_, "action ", schedule::to_string(a),
               " is not for pipeline rank ", pp_rank_);
    LOOM_CHECK(stages_.count(a.stage), "no stage ", a.stage, " on this rank");
    if (a.kind == Kind::B || a.kind == Kind::W) last_backward_[a.stage] = i;
    if (a.kind == Kind::I) stages_.at(a.stage)->set_split_backward(true);
  }
  for (const auto& [peer, sends] : schedule::sends_to(lowered, pp_rank_))
    for (const auto& a : sends)
      sent_to_me_[peer].push_back(a.kind == Kind::SEND_F ? Key{a.stage + 1, a.microbatch, 0}
                                                         : Key{a.stage - 1, a.microbatch, 1});
  int64_t max_tag = int64_t(shape_.stages() + 1) * (shape_.microbatches + 1) * 3;
  LOOM_CHECK_LE(max_tag, pp_.max_tag(), "too many stages x micro-batches for the backend's tags");
  origin_us_ = now_us();
}

double Executor::now_us() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

int message_tag(const schedule::Shape& shape, int stage, int mb, int dir) {
  return (stage * (shape.microbatches + 1) + mb) * 3 + dir;
}

}  // namespace

int Executor::tag(const Key& k) const {
  return message_tag(shape_, k.stage, k.mb, k.dir);
}

// Stage index stages() is no stage's: the constructor's tag bound counts it.
std::pair<int, int> Executor::spare_tags(const schedule::Shape& shape) {
  return {message_tag(shape, shape.stages(), 0, 0), message_tag(shape, shape.stages(), 0, 1)};
}

void Executor::post_recv(const schedule::Action& a) {
  const Key k{a.stage, a.microbatch, a.kind == Kind::RECV_F ? 0 : 1};
  const int from = shape_.rank_of(k.dir == 0 ? k.stage - 1 : k.stage + 1);
  schedule::post_in_send_order(sent_to_me_[from], posted_from_[from], k,
                               [&](const Key& m) { post_recv(m); });
}

void Executor::post_recv(const Key& k) {
  if (inbox_.count(k) || mailbox_.count(k)) return;
  int from_stage = k.dir == 0 ? k.stage - 1 : k.stage + 1;
  // The gradient of a stage's output has the shape of the next stage's input.
  const ActivationSpec& spec = boundary_.at(k.dir == 0 ? k.stage : k.stage + 1);
  // A gradient has its activation's type (under bf16 autocast the residual stream stays fp32).
  torch::Tensor buf = torch::empty(spec.shape, device_options(spec.dtype));
  auto w = pp_.recv(buf, shape_.rank_of(from_stage), tag(k));
  inbox_.emplace(k, std::make_pair(buf, w));
}

torch::Tensor Executor::take(const Key& k, bool* waited) {
  if (auto it = mailbox_.find(k); it != mailbox_.end()) {
    torch::Tensor t = std::move(it->second);
    mailbox_.erase(it);
    return t;
  }
  auto it = inbox_.find(k);
  LOOM_CHECK(it != inbox_.end(), "stage ", k.stage, " micro-batch ", k.mb, " needs ",
             k.dir == 0 ? "an activation" : "a gradient",
             " that nothing sends (schedule lacks a RECV or the previous stage's action)");
  auto [t, w] = std::move(it->second);
  inbox_.erase(it);
  if (waited) *waited = !w->test();
  w->wait();
  return t;
}

void Executor::deliver(int to_stage, int mb, int dir, const torch::Tensor& t) {
  Key k{to_stage, mb, dir};
  if (shape_.rank_of(to_stage) == pp_rank_)
    mailbox_[k] = t.detach();
  else
    outbox_[k] = t.detach().contiguous();
}

// Sends that completed release their buffers now, not at the step's end: the step would
// otherwise hold one boundary tensor per micro-batch, however many the schedule runs. MPI and
// NCCL report completion; c10d's Gloo sends complete only in wait(), so under Gloo they still
// go at the step's end.
void Executor::reap_sends() {
  std::erase_if(sending_, [](const std::pair<torch::Tensor, comm::WorkPtr>& s) {
    if (!s.second->test()) return false;
    s.second->wait();  // completed: returns at once (or raises the failure)
    return true;
  });
}

StepReport Executor::run_step(const std::vector<torch::Tensor>& inputs,
                              const std::vector<torch::Tensor>& targets, double loss_scale) {
  StepReport rep;
  for (auto& [s, st] : stages_) st->reset_step_stats();
  posted_from_.clear();
  if (tied_) tied_->begin_pass();
  bool first_forward_done = false, last_forward_begun = false, reduction_held = false;
  size_t posted = 0;
  for (size_t i = 0; i < actions_.size(); ++i) {
    for (; posted < actions_.size() && posted <= i + schedule::kRecvLookahead; ++posted) {
      const auto& p = actions_[posted];
      if (p.kind == Kind::RECV_F || p.kind == Kind::RECV_B) post_recv(p);
    }
    const schedule::Action& a = actions_[i];
    // The action names what runs inside it for observers (the memory report); nothing is
    // built when no one observes.
    RECORD_USER_SCOPE(schedule::to_string(a));
    Stage& st = *stages_.at(a.stage);
    DpHooks* sync = hooks_.count(a.stage) ? hooks_.at(a.stage) : nullptr;
    if (sync && last_backward_.count(a.stage) && last_backward_[a.stage] == i &&
        !holds_reduction(a.stage))
      sync->on_last_backward();
    // A gradient sent is held by its send alone: let it go before a compute when it arrived
    // (the last stage sends nothing between its backwards, so the next send comes late).
    if (schedule::is_compute(a.kind)) reap_sends();
    double t0 = now_us();
    const double cpu0 = schedule::is_compute(a.kind) ? thread_cpu_s() : 0;
    // Sharded parameters: wait for the stage's all-gather (started by UNSHARD) right before the
    // first compute that needs it. Counted as data-parallel wait, not compute.
    double dp_wait_us = 0;
    if (sync && schedule::is_compute(a.kind)) {
      sync->before_compute(a.kind != Kind::F);
      dp_wait_us = now_us() - t0;
    }
    double wait_us = 0;
    auto take_timed = [&](const Key& k) {
      double w0 = now_us();
      torch::Tensor t = take(k);
      wait_us += now_us() - w0;
      return t;
    };
    switch (a.kind) {
      case Kind::F: {
        torch::Tensor in =
            st.is_first() ? inputs.at(a.microbatch) : take_timed({a.stage, a.microbatch, 0});
        torch::Tensor tgt = st.is_last() ? targets.at(a.microbatch) : torch::Tensor();
        if (tied_ && st.is_last() && !last_forward_begun) {
          last_forward_begun = true;
          tied_->before_last_forward();
        }
        torch::Tensor out = st.forward(a.microbatch, in, tgt, loss_scale);
        if (tied_ && st.is_first() && !first_forward_done) {
          first_forward_done = true;
          tied_->after_first_forward();
        }
        if (!st.is_last()) deliver(a.stage + 1, a.microbatch, 0, out);
        break;
      }
      case Kind::B:
      case Kind::I: {
        torch::Tensor g = st.is_last() ? torch::Tensor() : take_timed({a.stage, a.microbatch, 1});
        torch::Tensor gi =
            a.kind == Kind::B ? st.backward(a.microbatch, g) : st.backward_input(a.microbatch, g);
        if (!st.is_first()) deliver(a.stage - 1, a.microbatch, 1, gi);
        break;
      }
      case Kind::W: st.backward_weight(a.microbatch); break;
      case Kind::SEND_F:
      case Kind::SEND_B: {
        Key k = a.kind == Kind::SEND_F ? Key{a.stage + 1, a.microbatch, 0}
                                       : Key{a.stage - 1, a.microbatch, 1};
        auto it = outbox_.find(k);
        LOOM_CHECK(it != outbox_.end(), schedule::to_string(a),
                   " before the compute that produces it");
        torch::Tensor t = std::move(it->second);
        outbox_.erase(it);
        auto w = pp_.send(t, shape_.rank_of(k.stage), tag(k));
        reap_sends();
        sending_.emplace_back(t, w);
        break;
      }
      case Kind::RECV_F:
      case Kind::RECV_B:
        post_recv(a);  // normally already posted by the lookahead
        break;
      case Kind::UNSHARD:
        if (sync) sync->unshard();
        break;
      case Kind::RESHARD:
        if (sync) sync->reshard();
        break;
      case Kind::REDUCE_GRAD:
        if (sync && holds_reduction(a.stage))
          reduction_held = true;
        else if (sync)
          sync->reduce_grad();
        break;
    }
    double t1 = now_us();
    if (schedule::is_compute(a.kind)) {
      rep.compute_s += (t1 - t0 - wait_us - dp_wait_us) * 1e-6;
      rep.compute_cpu_s += thread_cpu_s() - cpu0;  // blocked waits take none
      int64_t act = 0;
      int live = 0;
      for (auto& [s, stg] : stages_) {
        act += stg->live_activation_bytes();
        live += stg->live_microbatches();
      }
      rep.peak_activation_bytes = std::max(rep.peak_activation_bytes, act);
      rep.peak_live_microbatches = std::max(rep.peak_live_microbatches, live);
    }
    {
      int64_t act = 0, working = 0;
      for (auto& [s, stg] : stages_) act += stg->live_activation_bytes();
      for (auto& [s, y] : hooks_) working += y->working_bytes();
      rep.peak_working_bytes = std::max(rep.peak_working_bytes, working);
      rep.peak_transient_bytes = std::max(rep.peak_transient_bytes, act + working);
    }
    rep.p2p_wait_s += wait_us * 1e-6;
    if (tracing_) {
      if (dp_wait_us > 1.0)
        trace_.push_back(
            {"wait:dp:" + schedule::to_string(a), "dp_wait", t0 - origin_us_, dp_wait_us});
      const double tw = t0 + dp_wait_us;
      if (wait_us > 1.0)
        trace_.push_back({"wait:" + schedule::to_string(a), "wait", tw - origin_us_, wait_us});
      trace_.push_back({schedule::to_string(a), std::string(schedule::kind_name(a.kind)),
                        tw + wait_us - origin_us_, t1 - tw - wait_us});
    }
  }
  double s0 = now_us();
  for (auto& [t, w] : sending_) w->wait();
  sending_.clear();
  rep.p2p_wait_s += (now_us() - s0) * 1e-6;
  LOOM_CHECK(inbox_.empty() && outbox_.empty() && mailbox_.empty(),
             "pipeline step ended with undelivered tensors (inbox ", inbox_.size(), ", outbox ",
             outbox_.size(), ", mailbox ", mailbox_.size(), ")");
  if (tied_) {
    const double t0 = now_us();
    tied_->end_pass();
    tied_->exchange_grad();
    tied_->mark_stale();  // the optimizer steps next
    if (reduction_held) hooks_.at(0)->reduce_grad();
    rep.p2p_wait_s += (now_us() - t0) * 1e-6;
    if (tracing_) trace_.push_back({"tied_head_grad", "wait", t0 - origin_us_, now_us() - t0});
  }
  return rep;
}

std::vector<torch::Tensor> Executor::run_forward(const std::vector<torch::Tensor>& inputs, int m) {
  std::vector<torch::Tensor> logits;
  std::vector<std::pair<torch::Tensor, comm::WorkPtr>> sends;
  if (tied_) tied_->begin_pass();
  for (auto& [s, st] : stages_) {  // std::map: stage order
    // Sharded parameters are gathered for the stage's evaluation and freed after it (the same
    // calls on every replica, so the DP collectives match).
    DpHooks* sync = hooks_.count(s) ? hooks_.at(s) : nullptr;
    if (sync) {
      sync->unshard();
      sync->before_compute(false);
    }
    for (int j = 0; j < m; ++j) {
      torch::Tensor in;
      if (st->is_first()) {
        in = inputs.at(j);
      } else if (shape_.rank_of(s - 1) == pp_rank_) {
        in = take({s, j, 2});
      } else {
        const ActivationSpec& spec = boundary_.at(s);
        in = torch::empty(spec.shape, device_options(spec.dtype));
        pp_.recv(in, shape_.rank_of(s - 1), tag({s, j, 2}))->wait();
      }
      if (tied_ && st->is_last() && j == 0) tied_->before_last_forward();
      torch::Tensor out = st->forward_eval(in);
      if (tied_ && st->is_first() && j == 0) tied_->after_first_forward();
      if (st->is_last()) {
        logits.push_back(out);
      } else if (shape_.rank_of(s + 1) == pp_rank_) {
        mailbox_[{s + 1, j, 2}] = out;
      } else {
        out = out.contiguous();
        sends.emplace_back(out, pp_.send(out, shape_.rank_of(s + 1), tag({s + 1, j, 2})));
      }
    }
    if (sync) sync->reshard();
  }
  for (auto& [t, w] : sends) w->wait();
  if (tied_) tied_->end_pass();
  return logits;
}

}  // namespace loom::parallel

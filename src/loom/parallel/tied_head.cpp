#include "loom/parallel/tied_head.h"

#include <utility>

#include "loom/common/error.h"

namespace loom::parallel {

std::unique_ptr<TiedHead> TiedHead::make(const std::map<int, Stage*>& stages, int num_stages,
                                         int first_rank, int last_rank, comm::Backend& pp,
                                         int weight_tag, int grad_tag) {
  Stage* first = stages.count(0) ? stages.at(0) : nullptr;
  Stage* last = stages.count(num_stages - 1) ? stages.at(num_stages - 1) : nullptr;
  if (num_stages < 2 || (!first && !last)) return nullptr;
  LOOM_CHECK(!last || last->blocks().back()->tied_matrix().defined(),
             "the last stage's head is not tied to the embedding");
  torch::Tensor weight, copy;
  if (first) {
    weight = first->blocks().front()->tied_matrix();
    LOOM_CHECK(weight.defined(), "the first stage's first block holds no token embedding");
  }
  if (last) {
    torch::NoGradGuard no_grad;
    const auto& head = last->blocks().back();
    // The build's values (the embedding's initialization), on the stage's device; a pass
    // refreshes them before the head uses them in training.
    copy = head->tied_matrix().detach().to(last->options(torch::kFloat32), /*non_blocking=*/false,
                                           /*copy=*/true);
    copy.set_requires_grad(true);
    head->set_tied_matrix(copy);
    last->add_grad_leaf(copy);
  }
  return std::unique_ptr<TiedHead>(
      new TiedHead(weight, copy, first_rank, last_rank, pp, weight_tag, grad_tag));
}

TiedHead::TiedHead(torch::Tensor weight, torch::Tensor copy, int first_rank, int last_rank,
                   comm::Backend& pp, int weight_tag, int grad_tag)
    : weight_(std::move(weight)),
      copy_(std::move(copy)),
      first_rank_(first_rank),
      last_rank_(last_rank),
      pp_(pp),
      weight_tag_(weight_tag),
      grad_tag_(grad_tag) {}

void TiedHead::begin_pass() {
  if (!stale_ || !holds_last() || holds_first()) return;
  weight_work_ = pp_.recv(copy_.detach(), first_rank_, weight_tag_);
}

void TiedHead::after_first_forward() {
  if (!stale_ || !holds_first()) return;
  torch::NoGradGuard no_grad;
  if (holds_last()) {
    copy_.detach().copy_(weight_);
    return;
  }
  // A view of the same storage: under zero3 the parameter is pointed elsewhere after the
  // stage's forwards, and this keeps the gathered buffer alive until the send completed.
  sent_ = weight_.detach().contiguous();
  weight_work_ = pp_.send(sent_, last_rank_, weight_tag_);
}

void TiedHead::before_last_forward() {
  if (stale_ && holds_last() && !holds_first() && weight_work_) weight_work_->wait();
}

void TiedHead::end_pass() {
  if (weight_work_) weight_work_->wait();
  weight_work_.reset();
  sent_ = torch::Tensor();
  stale_ = false;
}

void TiedHead::exchange_grad() {
  torch::NoGradGuard no_grad;
  torch::Tensor g;  // the copy's gradient, on the rank that adds it
  if (holds_last()) {
    g = copy_.grad().defined() ? copy_.grad() : torch::zeros_like(copy_);  // no backward reached it
    if (!holds_first()) pp_.send(g.contiguous(), first_rank_, grad_tag_)->wait();
  }
  if (holds_first()) {
    LOOM_CHECK(weight_.grad().defined(), "the embedding has no gradient to add the head's to");
    if (!holds_last()) {
      g = torch::empty_like(weight_.grad());
      pp_.recv(g, last_rank_, grad_tag_)->wait();
    }
    weight_.mutable_grad().add_(g);
  }
  if (holds_last() && copy_.grad().defined()) copy_.mutable_grad().zero_();
}

int64_t TiedHead::copy_bytes() const {
  return holds_last() ? copy_.numel() * int64_t(copy_.element_size()) : 0;
}

}  // namespace loom::parallel

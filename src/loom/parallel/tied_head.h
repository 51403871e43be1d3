#pragma once
// A head tied to the token embedding when the two sit on different pipeline stages
// (pp x loops > 1). The first stage's embedding stays the one parameter: one optimizer state,
// one checkpoint entry, one share of the gradient norm, whatever the data-parallel mode. The
// last stage's head multiplies by a copy that is no parameter:
//   - before a pass (training step, evaluation, sample) after the weight may have changed, the
//     copy is refreshed: sent right after the first stage's first forward of the pass (zero3
//     has the weight gathered then), waited for before the last stage's first forward;
//   - after the pipeline drains, the copy's gradient (the step's micro-batches summed) goes back
//     and is added to the embedding's before the first stage's gradient reduction starts (the
//     executor holds that stage's REDUCE_GRAD and bucket hooks until then).
// Both ends on one rank (V placement, or one pipeline rank with loops) copy locally.
// Megatron-LM keeps a second parameter on the last stage and all-reduces the two gradients
// instead: as many bytes on the pipeline link, and a second optimizer state.
// The weight is the first message of a pass between the two ranks and the gradient the last
// of a step, so backends that pair messages in order (NCCL) pair them as tags would.
#include <torch/torch.h>

#include <map>
#include <memory>

#include "loom/comm/backend.h"
#include "loom/parallel/stage.h"

namespace loom::parallel {

class TiedHead {
 public:
  // stages: this rank's stages of a pipeline of `num_stages` (by index); first_rank / last_rank:
  // the pipeline ranks of stage 0 and of the last stage; two tags no other message of `pp`
  // uses. For a model whose head is tied; null with one stage, or on a rank with neither end.
  // Gives the head its copy: call it before anything empties the parameters (zero3).
  static std::unique_ptr<TiedHead> make(const std::map<int, Stage*>& stages, int num_stages,
                                        int first_rank, int last_rank, comm::Backend& pp,
                                        int weight_tag, int grad_tag);

  // The copy is refreshed by the next pass (the optimizer is about to step, or stepped).
  void mark_stale() { stale_ = true; }
  void begin_pass();           // posts the copy's receive (last stage's rank, if stale)
  void after_first_forward();  // sends or copies the weight (first stage's rank, if stale)
  void before_last_forward();  // the copy has arrived (last stage's rank)
  void end_pass();             // the weight's send completed; the copy is fresh
  // After the step's backwards: the copy's gradient added to the embedding's, the copy's
  // gradient back to zero.
  void exchange_grad();
  // The copy's bytes on the last stage's rank (its gradient, once a backward ran, as many); 0
  // elsewhere.
  int64_t copy_bytes() const;

 private:
  TiedHead(torch::Tensor weight, torch::Tensor copy, int first_rank, int last_rank,
           comm::Backend& pp, int weight_tag, int grad_tag);
  bool holds_first() const { return weight_.defined(); }
  bool holds_last() const { return copy_.defined(); }

  torch::Tensor weight_;  // the embedding's parameter (first stage's rank), else undefined
  torch::Tensor copy_;    // the head's copy (last stage's rank), else undefined
  int first_rank_, last_rank_;
  comm::Backend& pp_;
  int weight_tag_, grad_tag_;
  bool stale_ = true;
  torch::Tensor sent_;  // the weight in flight (keeps a gathered buffer alive)
  comm::WorkPtr weight_work_;
};

}  // namespace loom::parallel

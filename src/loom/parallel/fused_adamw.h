#pragma once
// AdamW with one pass over memory per parameter tensor.
//
// torch::optim::AdamW (libtorch 1.13) updates a parameter with eight tensor operations (decay,
// two moment updates, sqrt, divide, add eps, addcdiv) and two temporaries: eight passes over
// parameters, gradients and moments. The optimizer is memory-bound, so this is most of its
// time: ~15 ms per step on the 3.3M-parameter GPT of bench/ddp_compare.sh, 3% of the step.
// FusedAdamW computes the same update, element by element, in one loop. It keeps the state in
// torch's own AdamWParamState (step, exp_avg, exp_avg_sq) under the same keys, so checkpoints
// are interchangeable with torch::optim::AdamW. Results equal torch's up to float rounding
// (the same formula; the compiler may contract a multiply-add). On a GPU the same update is
// ATen's multi-tensor fused AdamW kernel (torch.optim.AdamW(fused=True)): a few launches per
// step instead of eight per parameter. Other tensors, mixed devices, and amsgrad take
// torch's path.
#include <torch/torch.h>

namespace loom::parallel {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;

 protected:
  // The two fused paths; step() picks one by the parameters' device. Protected so that a test
  // can run the device path's ATen kernel on CPU tensors, where it has a kernel too.
  void step_on_host();
  void step_on_device();

 private:
  torch::optim::AdamWParamState& state_of(const torch::Tensor& p);
};

}  // namespace loom::parallel

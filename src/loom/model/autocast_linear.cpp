#include "loom/model/autocast_linear.h"

#include <ATen/autocast_mode.h>

namespace loom::model {

at::ScalarType product_type(const at::Tensor& x) {
  const c10::DeviceType device = x.device().type();
  if (x.scalar_type() == at::kFloat && at::autocast::is_autocast_enabled(device))
    return at::autocast::get_autocast_dtype(device);
  return x.scalar_type();
}

bool autocast_product(const at::Tensor& x, const at::Tensor& weight) {
  const c10::DeviceType device = x.device().type();
  if (weight.scalar_type() != at::kFloat || !at::autocast::is_autocast_enabled(device))
    return false;
  return x.scalar_type() == at::kFloat ||
         x.scalar_type() == at::autocast::get_autocast_dtype(device);
}

}  // namespace loom::model

#include "loom/parallel/adamw_kernel.h"

#include <cmath>

#include "loom/common/cpu_clones.h"

namespace loom::parallel {

LOOM_CPU_CLONES void adamw_update(float* __restrict p, const float* __restrict g,
                                  float* __restrict m, float* __restrict v, int64_t n, float decay,
                                  float beta1, float beta2, float step_size, float sqrt_bc2,
                                  float eps) {
  const float one_m_b1 = 1.0f - beta1, one_m_b2 = 1.0f - beta2;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * beta1 + one_m_b1 * gi;
    const float vi = v[i] * beta2 + one_m_b2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * (mi / (std::sqrt(vi) / sqrt_bc2 + eps));
  }
}

}  // namespace loom::parallel

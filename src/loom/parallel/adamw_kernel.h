#pragma once
// The element-wise AdamW update of one float32 tensor (no libtorch: compiled with
// -fno-math-errno so that the loop, sqrt included, vectorizes, once per instruction-set level,
// common/cpu_clones.h). Used by FusedAdamW.
#include <cstdint>

namespace loom::parallel {

// p = p * decay - step_size * m / (sqrt(v) / sqrt_bc2 + eps), after
// m = beta1 * m + (1 - beta1) * g and v = beta2 * v + (1 - beta2) * g * g.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float decay, float beta1,
                  float beta2, float step_size, float sqrt_bc2, float eps);

}  // namespace loom::parallel

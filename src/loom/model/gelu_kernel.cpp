#include "loom/model/gelu_kernel.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "loom/common/cpu_clones.h"

namespace loom::model {
namespace {

// e^y for y <= 0 (0 below -87): y = n·ln2 + r with |r| <= ln2/2, e^r by its Taylor polynomial
// to r^8 (relative error below 6e-9), 2^n by the exponent bits. Branch-free, so it vectorizes.
inline float exp_nonpositive(float y) {
  y = std::max(y, -87.0f);
  const float n = (y * 1.44269504088896341f + 12582912.0f) - 12582912.0f;       // round(y / ln2)
  const float r = (y - n * 0.693145751953125f) - n * 1.428606820309417232e-6f;  // ln2 in two parts
  float p = 1.0f / 40320;
  p = p * r + 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

struct CdfPdf {
  float cdf;  // Φ(x)
  float pdf;  // φ(x)
};

// erfc(z) = t·P(t)·e^(−z²), t = 1/(1 + p·z), for z = |x|/√2 >= 0; e^(−z²) = e^(−x²/2) is also
// √(2π)·φ(x). Φ(x) = erfc(z)/2 for x < 0 and 1 − erfc(z)/2 otherwise.
inline CdfPdf normal_cdf_pdf(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float e = exp_nonpositive(-0.5f * x * x);
  const float half_erfc = 0.5f * p * t * e;
  return {x < 0.0f ? half_erfc : 1.0f - half_erfc, e * 0.398942280401432678f};
}

}  // namespace

LOOM_CPU_CLONES void gelu_forward(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf_pdf(x[i]).cdf;
}

LOOM_CPU_CLONES void gelu_backward(const float* __restrict grad, const float* __restrict x,
                                   float* __restrict dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const CdfPdf c = normal_cdf_pdf(x[i]);
    dx[i] = grad[i] * (c.cdf + x[i] * c.pdf);
  }
}

}  // namespace loom::model

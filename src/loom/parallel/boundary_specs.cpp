#include "loom/parallel/boundary_specs.h"

#include <array>

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

// A spec on the wire: dtype, rank (number of dimensions), then the dimensions.
constexpr size_t kMaxDims = 8;
using Wire = std::array<int64_t, kMaxDims + 2>;

Wire encode(const ActivationSpec& s) {
  LOOM_CHECK_LE(s.shape.size(), kMaxDims, "activation with too many dimensions");
  Wire w{};
  w[0] = static_cast<int64_t>(s.dtype);
  w[1] = static_cast<int64_t>(s.shape.size());
  for (size_t i = 0; i < s.shape.size(); ++i) w[2 + i] = s.shape[i];
  return w;
}

ActivationSpec decode(const Wire& w) {
  LOOM_CHECK(w[1] >= 0 && w[1] <= int64_t(kMaxDims), "corrupt activation spec");
  return {std::vector<int64_t>(w.begin() + 2, w.begin() + 2 + w[1]),
          static_cast<torch::Dtype>(w[0])};
}

}  // namespace

std::vector<ActivationSpec> infer_boundaries(const std::map<int, Stage*>& stages,
                                             const schedule::Shape& shape, int pp_rank,
                                             comm::Backend& pp_comm,
                                             const ActivationSpec& model_input) {
  const int n = shape.stages();
  LOOM_CHECK_LE(n, pp_comm.max_tag(), "too many stages for the backend's tags");
  std::vector<ActivationSpec> spec(n + 1);
  for (int s = 0; s < n; ++s) {
    if (shape.rank_of(s) != pp_rank) continue;
    if (s == 0) {
      spec[0] = model_input;
    } else if (shape.rank_of(s - 1) != pp_rank) {  // else: computed by this rank just before
      Wire w{};
      pp_comm.recv(w.data(), w.size(), comm::DType::Int64, shape.rank_of(s - 1), s)->wait();
      spec[s] = decode(w);
    }
    spec[s + 1] = stages.at(s)->output_spec(spec[s]);
    if (s + 1 < n && shape.rank_of(s + 1) != pp_rank) {
      Wire w = encode(spec[s + 1]);
      pp_comm.send(w.data(), w.size(), comm::DType::Int64, shape.rank_of(s + 1), s + 1)->wait();
    }
  }
  return spec;
}

}  // namespace loom::parallel

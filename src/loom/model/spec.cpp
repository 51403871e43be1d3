#include "loom/model/spec.h"

namespace loom::model {

std::vector<int64_t> ModelSpec::batch_shape(int64_t micro_batch) const {
  std::vector<int64_t> shape{micro_batch};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  return shape;
}

ModelSpec spec_of(const config::ModelConfig& m) {
  using config::ModelKind;
  const int layers = static_cast<int>(m.layers);
  switch (m.kind) {
    case ModelKind::Gpt:    // embedding, transformer layers, final norm + head
    case ModelKind::Llama:  // the same cut
      return {layers + 2, {m.seq_len}, true, false, config::DataKind::Text};
    case ModelKind::Mlp:  // hidden layers, output layer
      return {layers + 1, {1, 28, 28}, false, true, config::DataKind::FashionMnist};
    case ModelKind::Cnn:  // two conv+pool blocks, two dense layers
      return {4, {1, 28, 28}, false, true, config::DataKind::FashionMnist};
  }
  return {};
}

}  // namespace loom::model

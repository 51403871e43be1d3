#include "loom/data/dataset.h"

namespace loom::data {

int64_t Array::numel() const {
  int64_t n = 1;  // a scalar (empty shape) holds one element
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace loom::data

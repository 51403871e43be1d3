// 1f1b (PipeDream-Flush) and interleaved (Megatron's depth-first looping 1F1B).
#include <algorithm>

#include "loom/schedule/generators.h"

namespace loom::schedule::detail {
namespace {

// The k-th forward (or backward) of a rank in Megatron's interleaved order: micro-batches go in
// groups of pp, each group through chunk 0, 1, ... (backward: chunk v-1, v-2, ...).
Action interleaved_action(const Shape& shape, int rank, int k, bool forward) {
  const int group = shape.pp * shape.loops;
  int chunk = (k % group) / shape.pp;
  if (!forward) chunk = shape.loops - 1 - chunk;
  int mb = (k / group) * shape.pp + k % shape.pp;
  return {chunk * shape.pp + rank, forward ? Kind::F : Kind::B, mb};
}

}  // namespace

Schedule gen_1f1b(const Shape& shape) {
  Schedule s = empty_schedule("1f1b", shape);
  const int m = shape.microbatches;
  for (int r = 0; r < shape.pp; ++r) {
    std::vector<Action>& list = s.ranks[r];
    // Warm-up: enough forwards to fill the pipeline below this rank.
    const int warmup = std::min(shape.pp - r - 1, m);
    for (int j = 0; j < warmup; ++j) list.push_back({r, Kind::F, j});
    for (int j = 0; j < m - warmup; ++j) {
      list.push_back({r, Kind::F, warmup + j});
      list.push_back({r, Kind::B, j});
    }
    for (int j = m - warmup; j < m; ++j) list.push_back({r, Kind::B, j});
  }
  return s;
}

Schedule gen_interleaved(const Shape& shape) {
  if (shape.loops == 1) {
    Schedule s = gen_1f1b(shape);
    s.name = "interleaved";
    return s;
  }
  Schedule s = empty_schedule("interleaved", shape);
  const int total = shape.microbatches * shape.loops;
  for (int r = 0; r < shape.pp; ++r) {
    std::vector<Action>& list = s.ranks[r];
    // Megatron's warm-up: deeper for earlier ranks, plus one full round per extra chunk.
    const int warmup = std::min((shape.pp - r - 1) * 2 + (shape.loops - 1) * shape.pp, total);
    for (int k = 0; k < warmup; ++k) list.push_back(interleaved_action(shape, r, k, true));
    for (int k = 0; k < total - warmup; ++k) {
      list.push_back(interleaved_action(shape, r, warmup + k, true));
      list.push_back(interleaved_action(shape, r, k, false));
    }
    for (int k = total - warmup; k < total; ++k)
      list.push_back(interleaved_action(shape, r, k, false));
  }
  return s;
}

}  // namespace loom::schedule::detail

#pragma once
// Internal to schedule/: the dependency rules shared by validate, timing and the generators.
// Progress of one (stage, micro-batch) is tracked in three slots: its forward, its input
// gradient (B or I) and its weight gradient (B or W). A B fills both gradient slots.
#include <vector>

#include "loom/schedule/schedule.h"

namespace loom::schedule::detail {

enum class Slot : int { Fwd = 0, InputGrad = 1, WeightGrad = 2 };

struct Dep {
  int stage;
  int microbatch;
  Slot slot;
};

// Dependencies of a compute action:
//   F(s,j): F(s-1,j);  B/I(s,j): F(s,j) and B/I(s+1,j);  W(s,j): I(s,j).
// Returns the count written to out (at most 2).
inline int deps_of(const Shape& shape, const Action& a, Dep out[2]) {
  int n = 0;
  switch (a.kind) {
    case Kind::F:
      if (a.stage > 0) out[n++] = {a.stage - 1, a.microbatch, Slot::Fwd};
      break;
    case Kind::B:
    case Kind::I:
      out[n++] = {a.stage, a.microbatch, Slot::Fwd};
      if (a.stage + 1 < shape.stages()) out[n++] = {a.stage + 1, a.microbatch, Slot::InputGrad};
      break;
    case Kind::W: out[n++] = {a.stage, a.microbatch, Slot::InputGrad}; break;
    default: break;
  }
  return n;
}

// Dense table indexed by (stage, micro-batch, slot).
template <typename T>
class SlotTable {
 public:
  SlotTable(const Shape& shape, T init)
      : m_(shape.microbatches), data_(static_cast<size_t>(shape.stages()) * m_ * 3, init) {}
  T& at(int stage, int mb, Slot slot) {
    return data_[(static_cast<size_t>(stage) * m_ + mb) * 3 + static_cast<int>(slot)];
  }
  T& at(const Dep& d) { return at(d.stage, d.microbatch, d.slot); }

 private:
  int m_;
  std::vector<T> data_;
};

// Marks a finished compute action in a table of flags or end times.
template <typename T>
void record(SlotTable<T>& table, const Action& a, T value) {
  switch (a.kind) {
    case Kind::F: table.at(a.stage, a.microbatch, Slot::Fwd) = value; break;
    case Kind::I: table.at(a.stage, a.microbatch, Slot::InputGrad) = value; break;
    case Kind::W: table.at(a.stage, a.microbatch, Slot::WeightGrad) = value; break;
    case Kind::B:
      table.at(a.stage, a.microbatch, Slot::InputGrad) = value;
      table.at(a.stage, a.microbatch, Slot::WeightGrad) = value;
      break;
    default: break;
  }
}

// Throws UsageError unless pp, loops and microbatches are all >= 1.
void check_shape(const Shape& shape);

}  // namespace loom::schedule::detail

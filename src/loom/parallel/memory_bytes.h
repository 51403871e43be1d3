#pragma once
// Bytes this rank holds for one stage, by category (per-rank accounting): what the stage's
// flat buffer, its data-parallel mode and its optimizer hold, exactly as allocated.
#include <cstdint>

namespace loom::parallel {

struct MemoryBytes {
  int64_t params = 0;
  int64_t grads = 0;
  int64_t optimizer = 0;
  // Of the above, transient full-size copies (zero3: gathered parameters; zero2/3: the full
  // gradient during the backward), at their peak. 0 for modes without such copies.
  int64_t working = 0;
  int64_t total() const { return params + grads + optimizer; }
};

}  // namespace loom::parallel

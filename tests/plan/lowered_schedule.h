#pragma once
// A generator's schedule lowered as the runtime runs it, for the simulator's tests.
#include <string>

#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"

namespace loom::plan::test {

inline schedule::Schedule lowered(const std::string& name, schedule::Shape shape,
                                  schedule::DpMode mode = schedule::DpMode::None) {
  schedule::LowerOptions lo;
  lo.dp_mode = mode;
  return schedule::lower(schedule::generate(name, shape), lo);
}

}  // namespace loom::plan::test

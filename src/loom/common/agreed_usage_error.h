#pragma once
// Bad input that every rank finds together, on what they all share (a checkpoint some of them
// cannot read): one rank, `reporter`, says it in one line, and the ranks end together with
// exit code 2, none aborted. (A UsageError found by one rank alone stops all of them from it.)
#include "loom/common/error.h"

namespace loom {

class AgreedUsageError : public AgreedError {
 public:
  using AgreedError::AgreedError;
};

}  // namespace loom

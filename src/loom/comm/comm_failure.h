#pragma once
// A communication that failed (not one that timed out): most often a peer that is gone, a rank
// that died or failed first. The CLI gives the launcher a moment to stop this rank for that
// failure before saying its own (cli/main.cpp).
#include "loom/common/error.h"

namespace loom::comm {

class CommFailure : public Error {
 public:
  using Error::Error;
};

}  // namespace loom::comm

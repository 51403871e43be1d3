#pragma once
// A communication that failed (not one that timed out): most often a peer that is gone, a rank
// that died or failed first. The CLI gives the launcher a moment to stop this rank for that
// failure before saying its own (cli/main.cpp).
#include <chrono>
#include <string>

#include "loom/common/error.h"

namespace loom::comm {

class CommFailure : public Error {
 public:
  using Error::Error;
};

// "[rank r] communication failed: <what>: <the error's first line>".
CommFailure communication_failed(const std::string& what, std::string error);

// "[rank r] communication timeout: <what> did not complete within <timeout> s (...)": an
// operation that neither completed nor failed in time (Work::wait, or a caller polling it).
Error communication_timeout(const std::string& what, std::chrono::milliseconds timeout);

}  // namespace loom::comm

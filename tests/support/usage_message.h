#pragma once
// The one-line message of the UsageError that `fn` throws ("" and a test failure if none).
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "loom/common/error.h"

namespace loom::test {

inline std::string usage_message(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError thrown";
  return "";
}

}  // namespace loom::test

#include "loom/common/error.h"

namespace loom::detail {

void check_failed(const char* file, int line, const std::string& what) {
  throw Error(concat(what, " at ", file, ":", line));
}

}  // namespace loom::detail

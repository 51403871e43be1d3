// loom tokenizer: not built yet (says so, exit 2).
#include "loom/cli/commands.h"
#include "loom/common/error.h"

namespace loom::cli {

int tokenizer_command(const std::vector<std::string>&) {
  LOOM_USAGE("loom tokenizer is not implemented yet");
}

}  // namespace loom::cli

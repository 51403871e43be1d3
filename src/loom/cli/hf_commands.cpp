// loom export, import: not built yet (each says so, exit 2).
#include "loom/cli/commands.h"
#include "loom/common/error.h"

namespace loom::cli {

int export_command(const std::vector<std::string>&) {
  LOOM_USAGE("loom export is not implemented yet");
}
int import_command(const std::vector<std::string>&) {
  LOOM_USAGE("loom import is not implemented yet");
}

}  // namespace loom::cli

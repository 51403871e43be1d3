#include "loom/common/log.h"

#include <cstdio>

namespace loom::log {
namespace {
int g_rank = -1;

void emit(const char* level, const std::string& msg) {
  if (g_rank >= 0)
    std::fprintf(stderr, "[rank %d] %s%s\n", g_rank, level, msg.c_str());
  else
    std::fprintf(stderr, "%s%s\n", level, msg.c_str());
  std::fflush(stderr);
}
}  // namespace

void set_rank(int r) {
  g_rank = r;
}
int rank() {
  return g_rank;
}
void info(const std::string& msg) {
  emit("", msg);
}
void warn(const std::string& msg) {
  emit("warning: ", msg);
}
void info0(const std::string& msg) {
  if (g_rank <= 0) emit("", msg);
}

}  // namespace loom::log

#include "loom/profile/child.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace loom::profile {

bool run_child(std::vector<std::string> cmd, bool quiet) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    setenv("OMP_NUM_THREADS", "1", 1);
    if (quiet) {
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) {
        ::dup2(null, STDOUT_FILENO);
        ::dup2(null, STDERR_FILENO);
      }
    }
    std::vector<char*> argv;
    for (auto& c : cmd) argv.push_back(c.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace loom::profile

#include "loom/train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <set>

#include "loom/common/error.h"

namespace loom::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kHeldEnv = "LOOM_OUTPUT_LOCKED";

std::string holder_text() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return detail::concat("pid ", ::getpid(), " on host ", host, " since ", when);
}

std::string read_holder(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "a process that has not said which" : text;
}

std::string g_made;  // the folder this process made and locked

}  // namespace

void remove_unused_output_folder() {
  if (g_made.empty()) return;
  std::error_code ec;
  fs::directory_iterator it(g_made, ec), end;
  if (ec || it == end || it->path().filename() != ".loom-lock" || ++it != end) return;
  fs::remove(fs::path(g_made) / ".loom-lock", ec);
  fs::remove(g_made, ec);
}

void lock_output_folder(const std::string& dir, bool made) {
  std::error_code ec;
  const std::string folder = fs::weakly_canonical(dir, ec).string();
  if (const char* held = std::getenv(kHeldEnv); held && folder == held) return;  // the launcher's
  // Every folder this process holds (the environment names only the last): a second flock of
  // one of them through a new descriptor would conflict with this process's own lock (the
  // in-process tests train in several folders, one after another, and again).
  static std::set<std::string> locked;
  if (locked.count(folder)) return;
  const std::string path = (fs::path(folder) / ".loom-lock").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    LOOM_USAGE("cannot create '", path, "': ", std::strerror(errno),
               "; pass a writable folder with --output.dir");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const std::string holder = read_holder(fd);
      ::close(fd);
      LOOM_USAGE("output folder '", dir, "' is in use by another loom run (", holder,
                 "); wait for it to end, or choose another --output.dir");
    }
    ::close(fd);
    return;  // no locks here (ENOLCK, EINVAL): go on as before
  }
  const std::string text = holder_text() + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, text.data(), text.size(), 0);
  locked.insert(folder);                  // fd stays open (the lock with it) until the process ends
  ::setenv(kHeldEnv, folder.c_str(), 1);  // for the ranks this process starts
  if (made && g_made.empty()) {
    g_made = folder;
    std::atexit(remove_unused_output_folder);
  }
}

}  // namespace loom::train

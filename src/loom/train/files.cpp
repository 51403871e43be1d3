#include "loom/train/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "loom/common/error.h"

namespace loom::train {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw Error(detail::concat("cannot ", what, " '", path, "': ", std::strerror(err)));
}

void write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) io_error("write", path, errno);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void fsync_folder(const fs::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // the data itself is safe; only the name's durability is weaker
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_error("create", tmp, errno);
  try {
    write_all(fd, content, path);
    if (::fsync(fd) != 0) io_error("flush", path, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    io_error("write", path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    io_error("rename into", path, err);
  }
  fsync_folder(fs::path(path).parent_path());
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error("open", path, errno);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) io_error("read", path, errno);
  return bytes;
}

LineFile::LineFile(std::string path, bool truncate) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0),
               0644);
  if (fd_ < 0) io_error("open", path_, errno);
}

LineFile::~LineFile() {
  ::close(fd_);
}

void LineFile::append(std::string_view line) {
  std::string text(line);
  text += '\n';
  struct stat st {};
  if (::fstat(fd_, &st) != 0) io_error("write", path_, errno);
  try {
    write_all(fd_, text, path_);
  } catch (...) {
    // A write that stopped inside the line (the disk filled up) leaves part of it: cut it off.
    const int cut = ::ftruncate(fd_, st.st_size);
    static_cast<void>(cut);  // the write's own error is the one to report
    throw;
  }
}

}  // namespace loom::train

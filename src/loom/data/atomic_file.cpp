#include "loom/data/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "loom/common/error.h"

namespace loom::data {
namespace {

void write_all(int fd, const char* p, size_t n, uint64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      LOOM_USAGE("cannot write ", path, " (", std::strerror(errno), "); free space or choose ",
                 "another place");
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), tmp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    LOOM_USAGE("cannot create ", path_, " (", std::strerror(errno),
               "); make its folder writable or choose another place");
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  write_all(fd_, bytes.data(), bytes.size(), size_, tmp_);
  size_ += bytes.size();
}

void AtomicFile::write_at(uint64_t offset, std::string_view bytes) {
  LOOM_CHECK_LE(offset + bytes.size(), size_, "write_at past the end of ", tmp_);
  write_all(fd_, bytes.data(), bytes.size(), offset, tmp_);
}

void AtomicFile::commit() {
  LOOM_CHECK_GE(fd_, 0, "commit twice: ", path_);
  const bool synced = ::fsync(fd_) == 0;
  const int err = errno;
  ::close(fd_);
  fd_ = -1;
  if (!synced || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int why = synced ? errno : err;
    ::unlink(tmp_.c_str());
    LOOM_USAGE("cannot write ", path_, " (", std::strerror(why),
               "); free space or choose another place");
  }
}

}  // namespace loom::data

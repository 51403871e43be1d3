#include "loom/common/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "loom/common/error.h"

namespace loom {
namespace fs = std::filesystem;

namespace {

[[noreturn]] void io_error(const char* what, const std::string& path, int err,
                           const std::string& usage_fix = "") {
  const std::string msg = detail::concat("cannot ", what, " '", path, "': ", std::strerror(err));
  if (!usage_fix.empty()) throw UsageError(detail::concat(msg, "; ", usage_fix));
  throw Error(msg);
}

// Returns 0, or the errno of the write that failed.
int write_all(int fd, std::string_view bytes, int64_t offset) {
  while (!bytes.empty()) {
    const ssize_t n = offset < 0 ? ::write(fd, bytes.data(), bytes.size())
                                 : ::pwrite(fd, bytes.data(), bytes.size(), offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    bytes.remove_prefix(static_cast<size_t>(n));
    if (offset >= 0) offset += n;
  }
  return 0;
}

void fsync_folder(const fs::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // the data itself is safe; only the name's durability is weaker
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string usage_fix, const std::string& tmp_tag)
    : path_(std::move(path)),
      tmp_(path_ + ".tmp" + (tmp_tag.empty() ? std::to_string(::getpid()) : tmp_tag)),
      usage_fix_(std::move(usage_fix)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const char* what, int err) const {
  io_error(what, path_, err, usage_fix_);
}

void AtomicFile::write(std::string_view bytes) {
  if (const int err = write_all(fd_, bytes, static_cast<int64_t>(size_))) fail("write", err);
  size_ += bytes.size();
}

void AtomicFile::write_at(uint64_t offset, std::string_view bytes) {
  LOOM_CHECK_LE(offset + bytes.size(), size_, "write_at past the end of ", tmp_);
  if (const int err = write_all(fd_, bytes, static_cast<int64_t>(offset))) fail("write", err);
}

void AtomicFile::commit() {
  LOOM_CHECK_GE(fd_, 0, "commit twice: ", path_);
  int err = ::fsync(fd_) == 0 ? 0 : errno;
  if (::close(fd_) != 0 && !err) err = errno;
  fd_ = -1;
  if (!err && ::rename(tmp_.c_str(), path_.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmp_.c_str());
    fail("write", err);
  }
  fsync_folder(fs::path(path_).parent_path());
}

AtomicFolder::AtomicFolder(std::string path, std::string usage_fix)
    : path_(std::move(path)), usage_fix_(std::move(usage_fix)) {
  fs::path target(path_);
  if (!target.has_filename()) target = target.parent_path();  // "out/" names "out"
  path_ = target.string();
  tmp_ = path_ + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) io_error("create", target.parent_path().string(), ec.value(), usage_fix_);
  fs::remove_all(tmp_, ec);  // left by an earlier process of the same pid
  if (::mkdir(tmp_.c_str(), 0755) != 0) io_error("create", path_, errno, usage_fix_);
}

AtomicFolder::~AtomicFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

std::string AtomicFolder::file(const std::string& name) const {
  return (fs::path(tmp_) / name).string();
}

void AtomicFolder::commit() {
  LOOM_CHECK(!committed_, "commit twice: ", path_);
  fsync_folder(tmp_);
  // rename(2) replaces a missing or empty folder; anything else is refused (ENOTEMPTY).
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) io_error("write", path_, errno, usage_fix_);
  committed_ = true;
  fsync_folder(fs::path(tmp_).parent_path());
}

void check_writable_path(const std::string& path, const std::string& usage_fix, bool make_folder) {
  std::error_code ec;
  if (path.empty()) throw UsageError(detail::concat("the file path is empty; ", usage_fix));
  if (fs::is_directory(path, ec))
    throw UsageError(detail::concat("'", path, "' is a folder, not a file; ", usage_fix));
  const fs::path folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : ".";
  if (make_folder) fs::create_directories(folder, ec);
  if (!fs::is_directory(folder, ec))
    throw UsageError(detail::concat("the folder of '", path, "' does not exist; ", usage_fix));
  check_writable_folder(folder.string(), usage_fix);
}

void check_writable_folder(const std::string& folder, const std::string& usage_fix) {
  const std::string probe =
      (fs::path(folder) / (".loom-write-test-" + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) io_error("write into", folder, errno, usage_fix);
  const int err = write_all(fd, "x", -1);  // a full disk lets the file be made, not written
  ::close(fd);
  ::unlink(probe.c_str());
  if (err) io_error("write into", folder, err, usage_fix);
}

void write_file_atomic(const std::string& path, std::string_view content,
                       const std::string& usage_fix) {
  AtomicFile f(path, usage_fix);
  f.write(content);
  f.commit();
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_error("open", path, errno);
  // Sized once from the file's length and read in a few large reads (a checkpoint file of
  // hundreds of MB: a stream read byte by byte, growing its string, took 5x as long and held
  // up to twice the bytes); what a file holds beyond its length (one that grew, or /proc's) is
  // read in small pieces.
  struct stat st {};
  std::string bytes;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  char more[1 << 16];
  for (;;) {
    const bool sized = got < bytes.size();
    const ssize_t r =
        sized ? ::read(fd, bytes.data() + got, bytes.size() - got) : ::read(fd, more, sizeof more);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      io_error("read", path, err);
    }
    if (r == 0) break;
    if (!sized) bytes.append(more, static_cast<size_t>(r));
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  bytes.resize(got);
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
  if (const int err = write_all(fd_, text, -1)) {
    // A write that stopped inside the line (the disk filled up) leaves part of it: cut it off.
    const int cut = ::ftruncate(fd_, st.st_size);
    static_cast<void>(cut);  // the write's own error is the one to report
    io_error("write", path_, err);
  }
}

}  // namespace loom

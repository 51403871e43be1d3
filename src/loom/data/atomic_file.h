#pragma once
// A file written under a temporary name and renamed into place by commit(), so that readers
// (other ranks, a later run) see either the old file or the whole new one. Destroyed without
// commit(), it removes the temporary file: a failed write leaves nothing half-written.
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::data {

class AtomicFile {
 public:
  // Throws UsageError naming `path` and the system's reason when it cannot be created.
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);
  void write_at(uint64_t offset, std::string_view bytes);  // over bytes written before
  uint64_t size() const { return size_; }
  void commit();  // fsync, rename onto the path

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace loom::data

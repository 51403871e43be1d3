#pragma once
// Files a run writes that nothing may find half-written: whole files (checkpoints, manifests,
// pictures) and append-only line files (metrics.jsonl).
#include <string>
#include <string_view>

namespace loom::train {

// Writes `content` to `path` durably and atomically: temporary file, fsync, rename, fsync of
// the folder. Throws Error naming the file and the system's reason (e.g. "No space left on
// device"); the temporary file is removed and `path` keeps its previous content.
void write_file_atomic(const std::string& path, std::string_view content);
// The whole file; Error naming it when it cannot be read.
std::string read_file(const std::string& path);

// A file of lines that grows by whole lines only (metrics.jsonl): a line that cannot be
// written whole (a full disk, an I/O error) is cut off again, and Error names the file and
// the system's reason.
class LineFile {
 public:
  // Opens `path` to append to it; `truncate`: empty it first.
  LineFile(std::string path, bool truncate);
  ~LineFile();
  LineFile(const LineFile&) = delete;
  LineFile& operator=(const LineFile&) = delete;

  // `line` and a newline, on the file (in the page cache: not flushed to the disk).
  void append(std::string_view line);

 private:
  std::string path_;
  int fd_;
};

}  // namespace loom::train

#pragma once
// Files that nothing may find half-written: a whole file written under a temporary name and
// renamed into place (AtomicFile, write_file_atomic: readers see the old file or the whole new
// one), a folder of such files published by one rename (AtomicFolder), and a file of lines that
// grows by whole lines (LineFile: metrics.jsonl). A failure throws Error naming the file and the
// system's reason ("cannot write 'x': No space left on device"), or UsageError (exit 2) with a fix,
// for a file the user named.
#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

class AtomicFile {
 public:
  // usage_fix: empty for Error; otherwise failures are UsageError ending in "; <usage_fix>".
  // The temporary file is "<path>.tmp<tmp_tag>", the process id when tmp_tag is empty (writers
  // on several hosts sharing a folder, whose ids may meet, pass a tag of their own).
  explicit AtomicFile(std::string path, std::string usage_fix = "",
                      const std::string& tmp_tag = "");
  ~AtomicFile();  // without commit(): the temporary file is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);
  void write_at(uint64_t offset, std::string_view bytes);  // over bytes written before
  uint64_t size() const { return size_; }
  void commit();  // fsync, rename onto the path, fsync of its folder

 private:
  [[noreturn]] void fail(const char* what, int err) const;

  std::string path_, tmp_, usage_fix_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// A folder that appears whole or not at all (an exported model, a consolidated checkpoint):
// its files are written into a temporary sibling ("<path>.tmp<pid>") that commit() renames
// onto `path`, which must then be missing or an empty folder. Without commit() the temporary
// folder and what it holds are removed, so a failed write leaves nothing to refuse a retry.
class AtomicFolder {
 public:
  // Creates the temporary folder (and `path`'s parents). usage_fix as for AtomicFile.
  explicit AtomicFolder(std::string path, std::string usage_fix = "");
  ~AtomicFolder();
  AtomicFolder(const AtomicFolder&) = delete;
  AtomicFolder& operator=(const AtomicFolder&) = delete;

  std::string file(const std::string& name) const;  // where to write `name` until commit()
  void commit();                                    // rename onto the path, fsync its parent

 private:
  std::string path_, tmp_, usage_fix_;
  bool committed_ = false;
};

// UsageError ending in "; usage_fix" (naming the system's reason) when a byte cannot be written
// into the folder: a probe file is created, written and removed there.
void check_writable_folder(const std::string& folder, const std::string& usage_fix);
// Before long work whose result goes to the file `path`: UsageError ending in "; usage_fix"
// when `path` is empty or a folder, or its folder is missing (made when `make_folder`) or
// cannot be written (check_writable_folder).
void check_writable_path(const std::string& path, const std::string& usage_fix,
                         bool make_folder = false);

// `content` into `path` through an AtomicFile (on failure `path` keeps its old content).
void write_file_atomic(const std::string& path, std::string_view content,
                       const std::string& usage_fix = "");
// The whole file; Error naming it when it cannot be read.
std::string read_file(const std::string& path);

// A file of lines that grows by whole lines only: a line that cannot be written whole (a full
// disk, an I/O error) is cut off again, and Error names the file and the reason.
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

}  // namespace loom

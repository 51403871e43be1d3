// Byte-level text from a file or a folder tree. All bytes are kept in memory (one byte each);
// windows are cut in get().
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>

#include "loom/common/error.h"
#include "loom/data/dataset.h"

namespace loom::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFix = "set data.path to a text file or a folder of text files";

bool is_index_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.size() >= 4 && name.compare(name.size() - 4, 4, ".dat") == 0;
}

// Identity of the real file or folder behind a path (symlinks followed).
std::pair<dev_t, ino_t> file_id(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

// Regular, non-".dat" files under `dir`, following symlinked folders once each (no cycles).
void walk(const fs::path& dir, std::set<std::pair<dev_t, ino_t>>& seen_dirs,
          std::vector<fs::path>& files) {
  if (!seen_dirs.insert(file_id(dir)).second) return;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) LOOM_USAGE("text: cannot list ", dir.string(), " (", ec.message(), "); ", kFix);
  for (const fs::directory_entry& entry : it) {
    const fs::file_status st = fs::status(entry.path(), ec);  // follows symlinks
    if (ec) continue;                                         // broken symlink
    if (fs::is_directory(st)) {
      walk(entry.path(), seen_dirs, files);
    } else if (fs::is_regular_file(st) && !is_index_file(entry.path())) {
      files.push_back(entry.path());
    }
  }
}

// The files to read, sorted by path; a real file reached by several paths is read only at the
// first of them, and a link to a ".dat" file is skipped like the file itself.
std::vector<fs::path> list_files(const fs::path& root) {
  std::vector<fs::path> found;
  std::set<std::pair<dev_t, ino_t>> seen_dirs;
  walk(root, seen_dirs, found);
  std::sort(found.begin(), found.end());
  std::vector<fs::path> files;
  std::set<std::pair<dev_t, ino_t>> seen_files;
  for (const fs::path& p : found) {
    std::error_code ec;
    const fs::path real = fs::canonical(p, ec);
    if (!ec && is_index_file(real)) continue;
    if (seen_files.insert(file_id(p)).second) files.push_back(p);
  }
  return files;
}

void append_file(const fs::path& p, std::vector<uint8_t>& bytes) {
  std::ifstream in(p, std::ios::binary);
  if (!in) LOOM_USAGE("text: cannot open ", p.string(), "; ", kFix);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) LOOM_USAGE("text: cannot read ", p.string(), "; ", kFix);
  const size_t have = bytes.size();
  bytes.resize(have + size);
  in.read(reinterpret_cast<char*>(bytes.data() + have), size);
  if (in.gcount() != size) LOOM_USAGE("text: cannot read ", p.string(), "; ", kFix);
}

class TextDataset : public Dataset {
 public:
  TextDataset(std::vector<uint8_t> bytes, int64_t seq_len, std::string what)
      : bytes_(std::move(bytes)),
        seq_len_(seq_len),
        n_((static_cast<int64_t>(bytes_.size()) - 1) / seq_len),
        what_(std::move(what)) {}

  int64_t size() const override { return n_; }

  Batch get(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Batch b;
    for (Array* a : {&b.input, &b.target}) {
      a->type = ElemType::Int64;
      a->shape = {n, seq_len_};
      a->i64.resize(n * seq_len_);
    }
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = indices[k];
      LOOM_CHECK(i >= 0 && i < n_, "sample index ", i, " outside [0, ", n_, ")");
      const uint8_t* src = bytes_.data() + i * seq_len_;
      int64_t* in = b.input.i64.data() + k * seq_len_;
      int64_t* out = b.target.i64.data() + k * seq_len_;
      for (int64_t t = 0; t < seq_len_; ++t) {
        in[t] = src[t];
        out[t] = src[t + 1];
      }
    }
    return b;
  }

  std::string describe() const override {
    return what_ + ": " + std::to_string(bytes_.size()) + " bytes, " + std::to_string(n_) +
           " samples of " + std::to_string(seq_len_) + " tokens";
  }

 private:
  std::vector<uint8_t> bytes_;
  int64_t seq_len_;
  int64_t n_;
  std::string what_;
};

}  // namespace

std::unique_ptr<Dataset> open_text(const std::string& path, int64_t seq_len, Split split,
                                   double test_fraction) {
  if (seq_len < 1) LOOM_USAGE("text: seq_len must be at least 1 (got ", seq_len, ")");
  if (!(test_fraction >= 0.0 && test_fraction < 1.0)) {
    LOOM_USAGE("text: test_fraction must be in [0, 1) (got ", test_fraction, ")");
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) LOOM_USAGE("text: ", path, " not found; ", kFix);

  std::vector<uint8_t> bytes;
  size_t file_count = 1;
  if (fs::is_directory(st)) {
    const std::vector<fs::path> files = list_files(path);
    if (files.empty()) LOOM_USAGE("text: ", path, " contains no text files; ", kFix);
    for (const fs::path& p : files) append_file(p, bytes);
    file_count = files.size();
  } else if (fs::is_regular_file(st)) {
    append_file(path, bytes);
  } else {
    LOOM_USAGE("text: ", path, " is neither a file nor a folder; ", kFix);
  }

  const auto total = static_cast<int64_t>(bytes.size());
  const auto test_bytes = static_cast<int64_t>(static_cast<double>(total) * test_fraction);
  const bool train = split == Split::Train;
  if (train) {
    bytes.resize(total - test_bytes);
  } else {
    bytes.erase(bytes.begin(), bytes.begin() + (total - test_bytes));
  }
  const auto have = static_cast<int64_t>(bytes.size());
  const char* split_name = train ? "train" : "test";
  if (have < seq_len + 1) {
    LOOM_USAGE("text: ", path, " is too short: its ", split_name, " split has ", have,
               " bytes but one sample needs seq_len + 1 = ", seq_len + 1,
               "; use more text or a smaller seq_len");
  }
  bytes.shrink_to_fit();
  const std::string what = "text " + std::string(split_name) + " (" + path + ", " +
                           std::to_string(file_count) + (file_count == 1 ? " file" : " files") +
                           ")";
  return std::make_unique<TextDataset>(std::move(bytes), seq_len, what);
}

}  // namespace loom::data

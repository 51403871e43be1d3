#include "loom/data/text_files.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <utility>

#include "loom/common/error.h"

namespace loom::data {
namespace {

namespace fs = std::filesystem;

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
          std::vector<fs::path>& files, std::string_view fix) {
  if (!seen_dirs.insert(file_id(dir)).second) return;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) LOOM_USAGE("text: cannot list ", dir.string(), " (", ec.message(), "); ", fix);
  for (const fs::directory_entry& entry : it) {
    const fs::file_status st = fs::status(entry.path(), ec);  // follows symlinks
    if (ec) continue;                                         // broken symlink
    if (fs::is_directory(st)) {
      walk(entry.path(), seen_dirs, files, fix);
    } else if (fs::is_regular_file(st) && !is_index_file(entry.path())) {
      files.push_back(entry.path());
    }
  }
}

// The files under `root`, sorted by path; a real file reached by several paths is read only at
// the first of them, and a link to a ".dat" file is skipped like the file itself.
std::vector<fs::path> list_folder(const fs::path& root, std::string_view fix) {
  std::vector<fs::path> found;
  std::set<std::pair<dev_t, ino_t>> seen_dirs;
  walk(root, seen_dirs, found, fix);
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

// The end of the longest prefix of `s` (at most `max` bytes) that does not cut a UTF-8
// character; `max` itself when no character start is found (not UTF-8).
size_t utf8_cut(std::string_view s, size_t max) {
  for (size_t cut = max; cut > 0 && max - cut < 4; --cut)
    if ((static_cast<unsigned char>(s[cut]) & 0xC0) != 0x80) return cut;
  return max;
}

}  // namespace

std::vector<fs::path> text_files(const std::string& path, std::string_view fix) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) LOOM_USAGE("text: ", path, " not found; ", fix);
  if (fs::is_regular_file(st)) return {fs::path(path)};
  if (!fs::is_directory(st)) LOOM_USAGE("text: ", path, " is neither a file nor a folder; ", fix);
  std::vector<fs::path> files = list_folder(path, fix);
  if (files.empty()) LOOM_USAGE("text: ", path, " contains no text files; ", fix);
  return files;
}

void append_file(const fs::path& file, std::string& bytes, std::string_view fix) {
  std::ifstream in(file, std::ios::binary);
  if (!in) LOOM_USAGE("text: cannot open ", file.string(), "; ", fix);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) LOOM_USAGE("text: cannot read ", file.string(), "; ", fix);
  const size_t have = bytes.size();
  bytes.resize(have + static_cast<size_t>(size));
  in.read(bytes.data() + have, size);
  if (in.gcount() != size) LOOM_USAGE("text: cannot read ", file.string(), "; ", fix);
}

void for_each_chunk(std::string_view text, const std::function<void(std::string_view)>& fn) {
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    size_t len = newline == std::string_view::npos ? text.size() : newline + 1;
    if (len > kMaxChunkBytes) len = utf8_cut(text, kMaxChunkBytes);
    fn(text.substr(0, len));
    text.remove_prefix(len);
  }
}

}  // namespace loom::data

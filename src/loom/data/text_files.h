#pragma once
// The files of a text corpus and the line chunks a tokenizer sees. Shared by the byte-level
// dataset, the token cache and `loom tokenizer train`, so that all read the same text.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::data {

// The fix a usage error about the corpus names: the setting that gave its path.
inline constexpr std::string_view kDataPathFix =
    "set data.path to a text file or a folder of text files";

// `path` itself when it is a file; otherwise every regular file under the folder, sorted by
// path, following symlinked folders once, a file reached by several paths only once, and
// skipping "*.dat" index files (the fortune package's). Throws UsageError naming `fix` when
// missing or empty.
std::vector<std::filesystem::path> text_files(const std::string& path,
                                              std::string_view fix = kDataPathFix);

// Appends the bytes of `file` to `bytes` (UsageError naming it and `fix` when unreadable).
void append_file(const std::filesystem::path& file, std::string& bytes,
                 std::string_view fix = kDataPathFix);

// Lines longer than this are cut (at a UTF-8 character boundary) into several chunks.
inline constexpr size_t kMaxChunkBytes = 4096;

// Calls `fn` on each chunk of `text` in order: each line with its '\n', lines longer than
// kMaxChunkBytes cut into pieces. The chunks concatenated are `text`; tokenizers encode them
// one at a time, so no token spans two lines.
void for_each_chunk(std::string_view text, const std::function<void(std::string_view)>& fn);

}  // namespace loom::data

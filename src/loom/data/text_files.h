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

// `path` itself when it is a file; otherwise every regular file under the folder, sorted by
// path, following symlinked folders once, a file reached by several paths only once, and
// skipping "*.dat" index files (the fortune package's). Throws UsageError when missing or empty.
std::vector<std::filesystem::path> text_files(const std::string& path);

// Appends the bytes of `file` to `bytes` (UsageError naming it when unreadable).
void append_file(const std::filesystem::path& file, std::string& bytes);

// Lines longer than this are cut (at a UTF-8 character boundary) into several chunks.
inline constexpr size_t kMaxChunkBytes = 4096;

// Calls `fn` on each chunk of `text` in order: each line with its '\n', lines longer than
// kMaxChunkBytes cut into pieces. The chunks concatenated are `text`; tokenizers encode them
// one at a time, so no token spans two lines.
void for_each_chunk(std::string_view text, const std::function<void(std::string_view)>& fn);

}  // namespace loom::data

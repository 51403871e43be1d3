#include "loom/data/token_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/log.h"
#include "loom/data/text_files.h"
#include "loom/data/tokenizer.h"

namespace loom::data {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'T', 'O', 'K', '1'};

// The file starts with this, then the key, then the tokens (uint32) and the boundaries, each
// at an offset that is a multiple of 8.
struct Header {
  char magic[8];
  uint64_t key_bytes, tokens, boundaries, corpus_bytes, files, tokens_at, boundaries_at;
};

uint64_t fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t round_up8(uint64_t v) {
  return (v + 7) / 8 * 8;
}

std::string read_whole(const std::string& path) {
  std::string s;
  append_file(path, s);
  return s;
}

// What the cache is made from: the tokenizer's content and each corpus file's identity.
std::string cache_key(const std::vector<fs::path>& files, const std::string& tokenizer) {
  const std::string model = read_whole(tokenizer);
  std::string key = "loom token cache 1\ntokenizer " + hex(fnv1a(model)) + " " +
                    std::to_string(model.size()) + "\n";
  for (const fs::path& f : files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) LOOM_USAGE("text: cannot read ", f.string());
    const auto mtime_ns =
        static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
    key += fs::absolute(f).lexically_normal().string() + "\t" + std::to_string(st.st_size) + "\t" +
           std::to_string(mtime_ns) + "\n";
  }
  return key;
}

fs::path cache_path(const std::string& corpus, const std::string& tokenizer) {
  const fs::path where = fs::absolute(corpus).lexically_normal();
  std::string name = where.filename().string();
  if (name.empty()) name = "corpus";
  return fs::path(tokenizer + ".cache") / (name + "-" + hex(fnv1a(where.string())) + ".tokens");
}

// Holds an exclusive lock on `path` (created if needed) while alive.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      LOOM_USAGE("cannot create ", path, " (", std::strerror(errno),
                 "); the token cache lives next to data.tokenizer: make that folder writable");
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() { ::close(fd_); }  // releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Tokenizes the corpus into `path`: header, key, tokens, boundaries.
void make_cache(const std::string& path, const std::vector<fs::path>& files,
                const std::string& tokenizer, const std::string& key) {
  const auto tok = open_tokenizer(tokenizer);
  AtomicFile out(path, "the token cache lives next to data.tokenizer: free space there");
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.key_bytes = key.size();
  h.files = files.size();
  h.tokens_at = round_up8(sizeof(Header) + key.size());
  out.write(std::string_view(reinterpret_cast<const char*>(&h), sizeof h));
  out.write(key);
  out.write(std::string(h.tokens_at - out.size(), '\0'));

  std::vector<TokenCache::Boundary> bounds = {{0, 0}};
  std::vector<uint32_t> ids;
  auto flush = [&] {
    out.write(std::string_view(reinterpret_cast<const char*>(ids.data()), ids.size() * 4));
    ids.clear();
  };
  for (const fs::path& f : files) {
    std::string text;
    append_file(f, text);
    for_each_chunk(text, [&](std::string_view chunk) {
      for (int64_t id : tok->encode(std::string(chunk))) ids.push_back(static_cast<uint32_t>(id));
      h.corpus_bytes += chunk.size();
      const uint64_t tokens = (out.size() - h.tokens_at) / 4 + ids.size();
      if (h.corpus_bytes - bounds.back().byte >= TokenCache::kBoundaryBytes)
        bounds.push_back({h.corpus_bytes, tokens});
    });
    flush();
  }
  h.tokens = (out.size() - h.tokens_at) / 4;
  if (bounds.back().byte != h.corpus_bytes) bounds.push_back({h.corpus_bytes, h.tokens});
  h.boundaries = bounds.size();
  h.boundaries_at = round_up8(out.size());
  out.write(std::string(h.boundaries_at - out.size(), '\0'));
  out.write(std::string_view(reinterpret_cast<const char*>(bounds.data()),
                             bounds.size() * sizeof(TokenCache::Boundary)));
  out.write_at(0, std::string_view(reinterpret_cast<const char*>(&h), sizeof h));
  out.commit();
}

}  // namespace

bool TokenCache::map(const std::string& path, const std::string& key) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(sizeof(Header));
  void* p = sized ? ::mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (p == MAP_FAILED) return false;
  const auto size = static_cast<uint64_t>(st.st_size);
  const char* base = static_cast<const char*>(p);
  Header h{};
  std::memcpy(&h, base, sizeof h);
  const bool valid = std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 &&
                     h.key_bytes == key.size() && sizeof h + h.key_bytes <= size &&
                     std::string_view(base + sizeof h, h.key_bytes) == key &&
                     h.tokens_at % 8 == 0 && h.boundaries_at % 8 == 0 &&
                     h.tokens_at + h.tokens * 4 <= h.boundaries_at &&
                     h.boundaries_at + h.boundaries * sizeof(Boundary) == size && h.boundaries >= 2;
  if (!valid) {
    ::munmap(p, size);
    return false;
  }
  path_ = path;
  mapping_ = p;
  mapped_bytes_ = size;
  tokens_ = reinterpret_cast<const uint32_t*>(base + h.tokens_at);
  boundaries_ = reinterpret_cast<const Boundary*>(base + h.boundaries_at);
  n_tokens_ = h.tokens;
  n_boundaries_ = h.boundaries;
  bytes_ = h.corpus_bytes;
  files_ = static_cast<int64_t>(h.files);
  return true;
}

TokenCache::~TokenCache() {
  if (mapping_) ::munmap(mapping_, mapped_bytes_);
}

std::shared_ptr<const TokenCache> TokenCache::open(const std::string& corpus,
                                                   const std::string& tokenizer) {
  const std::vector<fs::path> files = text_files(corpus);
  open_tokenizer(tokenizer);  // a missing or broken model: its own message
  const std::string key = cache_key(files, tokenizer);
  const fs::path path = cache_path(corpus, tokenizer);
  std::shared_ptr<TokenCache> cache(new TokenCache());
  if (cache->map(path, key)) return cache;

  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec)
    LOOM_USAGE("cannot create ", path.parent_path().string(), " (", ec.message(),
               "); the token cache lives next to data.tokenizer: make that folder writable");
  FileLock lock(path.string() + ".lock");
  if (cache->map(path, key)) return cache;  // another process made it while this one waited
  log::info("text: tokenizing " + corpus + " with " + tokenizer + " once; cache " + path.string());
  const auto t0 = std::chrono::steady_clock::now();
  make_cache(path, files, tokenizer, key);
  LOOM_CHECK(cache->map(path, key), "the token cache just written does not read back: ", path);
  cache->made_ = true;
  log::info(
      "text: " + std::to_string(cache->bytes()) + " bytes -> " +
      std::to_string(cache->tokens().size()) + " tokens in " +
      std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) +
      " s");
  return cache;
}

}  // namespace loom::data

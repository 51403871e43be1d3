#include "loom/train/host_copies.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/train/shared_folder.h"

namespace loom::train {

namespace fs = std::filesystem;

namespace {

// The groups' lowest ranks in order, and each group's ranks in order.
std::map<int, std::vector<int>> members(const std::vector<int>& group) {
  std::map<int, std::vector<int>> out;
  for (int r = 0; r < static_cast<int>(group.size()); ++r) out[group[r]].push_back(r);
  return out;
}

// `bytes` as `path` on this host, durably; a rank of another host sharing the folder may write
// the same file at once (the same bytes), so the temporary name carries the rank, not the pid.
void write_copy(const fs::path& path, const std::string& bytes, int rank) {
  const fs::path tmp = path.string() + ".tmp-r" + std::to_string(rank);
  write_file_atomic(tmp.string(), bytes);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write '" + path.string() + "': " + ec.message());
  }
  const int fd = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {  // the rename survives a crash
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void broadcast_text(comm::Backend& world, std::string& text, int root) {
  int64_t size = static_cast<int64_t>(text.size());
  world.broadcast(&size, 1, comm::DType::Int64, root)->wait();
  text.resize(static_cast<size_t>(size));
  if (size > 0) world.broadcast(text.data(), text.size(), comm::DType::UInt8, root)->wait();
}

std::vector<FileCopy> copies_to_next_group(const std::vector<int>& group) {
  const auto by_group = members(group);
  if (by_group.size() < 2) return {};
  std::vector<FileCopy> out;
  for (auto it = by_group.begin(); it != by_group.end(); ++it) {
    auto next = std::next(it) == by_group.end() ? by_group.begin() : std::next(it);
    const std::vector<int>& from = it->second;
    const std::vector<int>& to = next->second;
    for (size_t k = 0; k < from.size(); ++k) out.push_back({from[k], from[k], to[k % to.size()]});
  }
  std::sort(out.begin(), out.end(),
            [](const FileCopy& a, const FileCopy& b) { return a.file < b.file; });
  return out;
}

std::vector<FileCopy> fetches(const std::vector<int>& group,
                              const std::vector<std::vector<bool>>& here,
                              const std::vector<std::vector<bool>>& need) {
  const size_t files = here.empty() ? 0 : here[0].size();
  std::vector<FileCopy> out;
  size_t turn = 0;  // the copies take the holders in turn
  for (size_t i = 0; i < files; ++i) {
    std::vector<int> holders;
    for (size_t r = 0; r < here.size(); ++r)
      if (here[r][i]) holders.push_back(static_cast<int>(r));
    if (holders.empty()) continue;
    for (const auto& [lowest, ranks] : members(group)) {
      bool has = false;
      int receiver = -1;
      for (int r : ranks) {
        has |= here[r][i];
        if (need[r][i] && receiver < 0) receiver = r;
      }
      if (has || receiver < 0) continue;
      const int sender = holders[turn++ % holders.size()];
      out.push_back({static_cast<int>(i), sender, receiver});
    }
  }
  return out;
}

std::string run_copies(comm::Backend& world, const std::vector<FileCopy>& copies,
                       const std::vector<Manifest::File>& files, const std::string& dir,
                       const std::function<std::string_view(int)>& content,
                       const std::function<void(const std::string&)>& before_write,
                       size_t chunk_bytes) {
  const int me = world.rank();
  // What this rank sends, read first: a sender that cannot read its file stops every copy
  // (no receiver waits for bytes that will not come).
  std::map<int, std::string_view> out;
  std::string failure;
  for (const FileCopy& c : copies) {
    if (c.from != me || out.count(c.file)) continue;
    try {
      const std::string_view bytes = content(c.file);
      const Manifest::File& f = files.at(c.file);
      if (static_cast<int64_t>(bytes.size()) != f.bytes)
        throw Error(detail::concat("checkpoint file '", (fs::path(dir) / f.name).string(), "' is ",
                                   bytes.size(), " bytes, its manifest says ", f.bytes));
      out[c.file] = bytes;
    } catch (const Error& e) {
      failure = e.what();
      break;
    }
  }
  if (!ranks_where(world, !failure.empty()).empty()) return failure;

  // Every chunk between two ranks takes the next tag of that pair: both sides walk `copies` in
  // the same order, so their tags agree.
  std::map<std::pair<int, int>, int64_t> next_tag;
  std::vector<std::pair<size_t, std::unique_ptr<std::string>>> in;  // (copy, bytes)
  std::vector<comm::WorkPtr> works;
  for (size_t k = 0; k < copies.size(); ++k) {
    const FileCopy& c = copies[k];
    if (c.from == c.to) continue;
    const size_t bytes = static_cast<size_t>(files.at(c.file).bytes);
    int64_t& tag = next_tag[{c.from, c.to}];
    std::string* buf = nullptr;
    if (c.to == me) {
      in.emplace_back(k, std::make_unique<std::string>(bytes, '\0'));
      buf = in.back().second.get();
    }
    for (size_t at = 0; at < bytes; at += chunk_bytes) {  // an empty file sends nothing
      const size_t n = std::min(chunk_bytes, bytes - at);
      const int t = static_cast<int>(tag++ % (world.max_tag() + 1));
      if (c.from == me)
        works.push_back(world.send(out.at(c.file).data() + at, n, comm::DType::UInt8, c.to, t));
      if (c.to == me)
        works.push_back(world.recv(buf->data() + at, n, comm::DType::UInt8, c.from, t));
    }
  }
  for (auto& w : works) w->wait();

  for (const auto& [k, bytes] : in) {
    const Manifest::File& f = files.at(copies[k].file);
    const fs::path path = fs::path(dir) / f.name;
    try {
      if (crc32_of(*bytes) != f.crc32)
        throw Error(detail::concat("checkpoint file '", path.string(), "' from rank ",
                                   copies[k].from, " arrived damaged (CRC-32 ", crc32_of(*bytes),
                                   ", its manifest says ", f.crc32, ")"));
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (before_write) before_write(path.string());
      write_copy(path, *bytes, me);
    } catch (const Error& e) {
      if (failure.empty()) failure = e.what();
    }
  }
  return failure;
}

}  // namespace loom::train

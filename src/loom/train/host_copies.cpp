#include "loom/train/host_copies.h"

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

// Receives one file's chunks from `from` (their tags from `tag` on) and writes each as it
// arrives: at most `window` chunks in memory, whatever the file's size. A chunk that cannot be
// written does not stop the receiving (the sender's messages are taken all the same); nothing
// is left under `path` or a temporary name unless every byte arrived, was written and matches
// the manifest's CRC-32. Returns the failure ("" when none).
std::string receive_file(comm::Backend& world, int from, int64_t tag, const Manifest::File& f,
                         const fs::path& path, size_t chunk_bytes,
                         const std::function<void(const std::string&)>& before_write) {
  constexpr size_t window = 2;
  const size_t bytes = static_cast<size_t>(f.bytes);
  const size_t chunks = (bytes + chunk_bytes - 1) / chunk_bytes;
  std::string failure;
  std::unique_ptr<AtomicFile> out;
  try {
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (before_write) before_write(path.string());
    // A rank of another host sharing the folder may write the same file at once (the same
    // bytes): the temporary name carries the rank, not the process id.
    out = std::make_unique<AtomicFile>(path.string(), "", "-r" + std::to_string(world.rank()));
  } catch (const Error& e) {
    failure = e.what();
  }
  std::vector<std::string> buf(std::min(window, chunks));
  std::vector<comm::WorkPtr> work(buf.size());
  auto post = [&](size_t i) {
    std::string& b = buf[i % window];
    b.resize(std::min(chunk_bytes, bytes - i * chunk_bytes));
    const int t = static_cast<int>((tag + static_cast<int64_t>(i)) % (world.max_tag() + 1));
    work[i % window] = world.recv(b.data(), b.size(), comm::DType::UInt8, from, t);
  };
  for (size_t i = 0; i < buf.size(); ++i) post(i);
  uint32_t crc = 0;
  for (size_t i = 0; i < chunks; ++i) {
    work[i % window]->wait();
    const std::string& b = buf[i % window];
    crc = crc32_of(b, crc);
    if (out && failure.empty()) {
      try {
        out->write(b);
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    if (i + window < chunks) post(i + window);
  }
  if (!failure.empty()) return failure;  // `out` gone: its temporary file removed
  try {
    if (crc != f.crc32)
      throw Error(detail::concat("checkpoint file '", path.string(), "' from rank ", from,
                                 " arrived damaged (CRC-32 ", crc, ", its manifest says ", f.crc32,
                                 ")"));
    out->commit();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
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
  // the same order, so their tags agree. Every send is posted first (the bytes are in memory
  // already); then this rank receives its files one after the other, a few chunks at a time.
  std::map<std::pair<int, int>, int64_t> next_tag;
  std::vector<comm::WorkPtr> sends;
  std::vector<std::pair<size_t, int64_t>> incoming;  // (copy, its first tag)
  for (size_t k = 0; k < copies.size(); ++k) {
    const FileCopy& c = copies[k];
    if (c.from == c.to) continue;
    const size_t bytes = static_cast<size_t>(files.at(c.file).bytes);
    int64_t& tag = next_tag[{c.from, c.to}];
    if (c.to == me) incoming.emplace_back(k, tag);
    for (size_t at = 0; at < bytes; at += chunk_bytes) {  // an empty file sends nothing
      const size_t n = std::min(chunk_bytes, bytes - at);
      const int t = static_cast<int>(tag++ % (world.max_tag() + 1));
      if (c.from == me)
        sends.push_back(world.send(out.at(c.file).data() + at, n, comm::DType::UInt8, c.to, t));
    }
  }
  for (const auto& [k, tag] : incoming) {
    const Manifest::File& f = files.at(copies[k].file);
    const std::string why = receive_file(world, copies[k].from, tag, f, fs::path(dir) / f.name,
                                         chunk_bytes, before_write);
    if (failure.empty()) failure = why;
  }
  for (auto& w : sends) w->wait();
  return failure;
}

}  // namespace loom::train

#include "loom/train/host_copies.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "loom/comm/comm_failure.h"
#include "loom/comm/wait_thread.h"
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

using Clock = std::chrono::steady_clock;

int tag_of(comm::Backend& world, int64_t tag) {
  return static_cast<int>(tag % (world.max_tag() + 1));
}

// The files between one pair of ranks, in `copies` order, are one stream of chunks: chunk k
// under tag k, posted in that order on both sides (NCCL matches a pair's
// messages by their order, not their tags).
struct StreamChunk {
  size_t file;  // index into the stream's files
  size_t at, n;
};
std::vector<StreamChunk> stream_chunks(const std::vector<size_t>& file_bytes, size_t chunk_bytes) {
  std::vector<StreamChunk> out;
  for (size_t f = 0; f < file_bytes.size(); ++f)
    for (size_t at = 0; at < file_bytes[f]; at += chunk_bytes)  // an empty file sends nothing
      out.push_back({f, at, std::min(chunk_bytes, file_bytes[f] - at)});
  return out;
}

// A stream's operations in the order posted, and whether the oldest completed: seen by a
// poll under MPI; under Gloo, which reports completion only to a wait, by a thread of the
// stream's own that waits on each in turn.
class InFlight {
 public:
  explicit InFlight(bool threaded)
      : waiter_(threaded ? std::make_unique<comm::WaitThread>() : nullptr) {}
  void push(comm::WorkPtr w) {
    if (waiter_) waiter_->add(w);
    works_.push_back(std::move(w));
  }
  // Takes the oldest if it completed (waits for it when `block`); true when it took one.
  // Throws on a failed or timed-out operation.
  bool take(bool block) {
    if (works_.empty()) return false;
    if (waiter_) {
      if (!block && waiter_->waited() == taken_) return false;
      waiter_->wait_for(taken_ + 1);
    } else {
      if (!block && !works_.front()->test()) return false;
      works_.front()->wait();
    }
    works_.pop_front();
    ++taken_;
    return true;
  }
  bool empty() const { return works_.empty(); }
  const comm::Work* oldest() const { return works_.empty() ? nullptr : works_.front().get(); }

 private:
  std::deque<comm::WorkPtr> works_;
  size_t taken_ = 0;
  std::unique_ptr<comm::WaitThread> waiter_;
};

// The files this rank sends one peer: posted `window` chunks at a time (every chunk at once
// when every file's bytes are in memory), the next read as one completes.
class Sending {
 public:
  // threaded: completions seen by a thread (InFlight).
  Sending(comm::Backend& world, int to, std::vector<CopySource> files, size_t chunk_bytes,
          bool threaded, const comm::Options& options)
      : world_(world), to_(to), files_(std::move(files)), options_(options), ops_(threaded) {
    std::vector<size_t> bytes;
    for (const CopySource& f : files_) {
      bytes.push_back(f.bytes);
      if (f.window > 0) window_ = window_ == 0 ? f.window : std::min(window_, f.window);
    }
    chunks_ = stream_chunks(bytes, chunk_bytes);
    if (window_ == 0) window_ = chunks_.size();
    while (next_ < chunks_.size() && next_ < window_) post({});
  }
  // Takes the oldest chunk if it was sent (waits for it when `block`) and posts the next;
  // true when it took one. Throws on a failed or timed-out send.
  bool advance(bool block) {
    if (!ops_.take(block)) return false;
    std::string buf = std::move(bufs_.front());
    bufs_.pop_front();
    if (next_ < chunks_.size()) post(std::move(buf));
    return true;
  }
  bool finished() const { return ops_.empty(); }
  bool posts_more() const { return next_ < chunks_.size(); }  // chunks left to post: no block
  const comm::Work* oldest() const { return ops_.oldest(); }
  const std::string& failure() const { return failure_; }

 private:
  void post(std::string buf) {
    const StreamChunk& c = chunks_[next_];
    // The buffer in its place first: a send reads it until it completes (a short string's
    // bytes would move with it).
    bufs_.push_back(std::move(buf));
    std::string& b = bufs_.back();
    std::string_view bytes;
    if (failure_.empty()) {
      try {
        bytes = files_[c.file].read(c.at, c.n, b);
        if (bytes.size() != c.n)
          throw Error(detail::concat("read ", bytes.size(), " bytes of ", c.n));
      } catch (const Error& e) {
        failure_ = e.what();
      }
    }
    if (!failure_.empty()) {  // the receiver still takes every chunk it waits for
      b.assign(c.n, '\0');
      bytes = b;
    }
    ops_.push(world_.send(bytes.data(), c.n, comm::DType::UInt8, to_,
                          tag_of(world_, static_cast<int64_t>(next_)), options_));
    ++next_;
  }

  comm::Backend& world_;
  int to_;
  std::vector<CopySource> files_;
  const comm::Options& options_;
  std::vector<StreamChunk> chunks_;
  size_t window_ = 0, next_ = 0;
  std::deque<std::string> bufs_;  // of the chunks in flight, oldest first
  std::string failure_;
  InFlight ops_;  // last: its thread's wait returned before the buffers go
};

// The files this rank receives from one peer, each written chunk by chunk as it arrives: at most
// `kWindow` chunks in memory, whatever the files' sizes. A chunk that cannot be written does not
// stop the receiving (the sender's messages are taken all the same); nothing is left under a
// file's path or a temporary name unless every byte of it arrived, was written and matches the
// manifest's CRC-32.
class Receiving {
 public:
  struct File {
    const Manifest::File* file;
    fs::path path;
  };
  Receiving(comm::Backend& world, int from, std::vector<File> files, size_t chunk_bytes,
            const std::function<void(const std::string&)>& before_write, bool threaded,
            const comm::Options& options)
      : world_(world),
        from_(from),
        files_(std::move(files)),
        before_write_(before_write),
        options_(options),
        state_(files_.size()),
        ops_(threaded) {
    std::vector<size_t> bytes;
    for (const File& f : files_) bytes.push_back(static_cast<size_t>(f.file->bytes));
    chunks_ = stream_chunks(bytes, chunk_bytes);
    for (const StreamChunk& c : chunks_) ++state_[c.file].chunks;
    buf_.resize(std::min(kWindow, chunks_.size()));
    for (size_t k = 0; k < buf_.size(); ++k) post(k);
    settle();  // empty files before the first chunk
  }
  // Takes the next chunk if it arrived (waits for it when `block`); true when it took one.
  bool advance(bool block) {
    if (!ops_.take(block)) return false;
    const StreamChunk& c = chunks_[next_];
    FileState& f = state_[c.file];
    if (!f.opened) open(c.file);
    const std::string& b = buf_[next_ % kWindow];
    f.crc = crc32_of(b, f.crc);
    if (f.out && f.failure.empty()) {
      try {
        f.out->write(b);
      } catch (const Error& e) {
        f.failure = e.what();
      }
    }
    ++f.got;
    if (next_ + kWindow < chunks_.size()) post(next_ + kWindow);
    ++next_;
    settle();
    return true;
  }
  bool finished() const { return settled_ == files_.size(); }
  const comm::Work* oldest() const { return ops_.oldest(); }  // the chunk it waits for
  const std::string& failure() const { return failure_; }     // the first file's that failed

 private:
  static constexpr size_t kWindow = 2;
  struct FileState {
    std::unique_ptr<AtomicFile> out;
    bool opened = false;
    uint32_t crc = 0;
    size_t chunks = 0, got = 0;
    std::string failure;
  };

  void post(size_t k) {
    std::string& b = buf_[k % kWindow];
    b.resize(chunks_[k].n);
    ops_.push(world_.recv(b.data(), b.size(), comm::DType::UInt8, from_,
                          tag_of(world_, static_cast<int64_t>(k)), options_));
  }
  void open(size_t i) {
    FileState& f = state_[i];
    f.opened = true;
    const fs::path& path = files_[i].path;
    try {
      std::error_code ec;
      fs::create_directories(path.parent_path(), ec);
      if (before_write_) before_write_(path.string());
      // A rank of another host sharing the folder may write the same file at once (the same
      // bytes): the temporary name carries the rank, not the process id.
      f.out = std::make_unique<AtomicFile>(path.string(), "", "-r" + std::to_string(world_.rank()));
    } catch (const Error& e) {
      f.failure = e.what();
    }
  }
  // Commits, in order, the files whose chunks all arrived (an empty one has none).
  void settle() {
    for (; settled_ < files_.size() && state_[settled_].got == state_[settled_].chunks;
         ++settled_) {
      FileState& f = state_[settled_];
      if (!f.opened) open(settled_);
      try {
        if (!f.failure.empty()) throw Error(f.failure);
        if (f.crc != files_[settled_].file->crc32)
          throw Error(detail::concat("checkpoint file '", files_[settled_].path.string(),
                                     "' from rank ", from_, " arrived damaged (CRC-32 ", f.crc,
                                     ", its manifest says ", files_[settled_].file->crc32, ")"));
        f.out->commit();
      } catch (const Error& e) {
        if (failure_.empty()) failure_ = e.what();
      }
      f.out.reset();  // uncommitted: its temporary file removed
    }
  }

  comm::Backend& world_;
  int from_;
  std::vector<File> files_;
  const std::function<void(const std::string&)>& before_write_;
  const comm::Options& options_;
  std::vector<FileState> state_;
  std::vector<StreamChunk> chunks_;
  size_t next_ = 0, settled_ = 0;
  std::vector<std::string> buf_;
  std::string failure_;
  InFlight ops_;  // last: its thread's wait returned before the buffers go
};

}  // namespace

void broadcast_text(comm::Backend& world, std::string& text, int root) {
  comm::Backend& net = world.host_world();
  int64_t size = static_cast<int64_t>(text.size());
  net.broadcast(&size, 1, comm::DType::Int64, root)->wait();
  text.resize(static_cast<size_t>(size));
  if (size > 0) net.broadcast(text.data(), text.size(), comm::DType::UInt8, root)->wait();
}

std::vector<FileCopy> copies_to_next_group(const std::vector<int>& group, int hosts) {
  std::vector<const std::vector<int>*> ring;  // the groups' ranks, by lowest rank
  const auto by_group = members(group);
  for (const auto& [lowest, ranks] : by_group) ring.push_back(&ranks);
  const size_t n = ring.size();
  const size_t each = std::min(static_cast<size_t>(std::max(hosts, 0)), n == 0 ? 0 : n - 1);
  std::vector<FileCopy> out;
  for (size_t g = 0; g < n; ++g)
    for (size_t j = 1; j <= each; ++j) {
      const std::vector<int>& from = *ring[g];
      const std::vector<int>& to = *ring[(g + j) % n];
      for (size_t k = 0; k < from.size(); ++k) out.push_back({from[k], from[k], to[k % to.size()]});
    }
  std::stable_sort(out.begin(), out.end(),
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

CopySource in_memory(std::string_view bytes) {
  return {bytes.size(), [bytes](size_t at, size_t n, std::string&) { return bytes.substr(at, n); },
          0};
}

CopySource from_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(detail::concat("cannot read '", path, "': ", std::strerror(errno)));
  auto file = std::shared_ptr<int>(new int(fd), [](const int* f) {
    ::close(*f);
    delete f;
  });
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(detail::concat("cannot read '", path, "': ", std::strerror(errno)));
  auto read = [file, path](size_t at, size_t n, std::string& buf) {
    buf.resize(n);
    for (size_t got = 0; got < n;) {
      const ssize_t r = ::pread(*file, buf.data() + got, n - got, static_cast<off_t>(at + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw Error(detail::concat("cannot read '", path,
                                   "': ", r == 0 ? "it ended early" : std::strerror(errno)));
      got += static_cast<size_t>(r);
    }
    return std::string_view(buf);
  };
  return {static_cast<size_t>(st.st_size), read, 2};
}

std::string run_copies(comm::Backend& world, const std::vector<FileCopy>& copies,
                       const std::vector<Manifest::File>& files, const std::string& dir,
                       const std::function<CopySource(int)>& source,
                       const std::function<void(const std::string&)>& before_write,
                       size_t chunk_bytes, const comm::Options& options) {
  comm::Backend& net = world.host_world();  // under NCCL, Gloo beside it
  LOOM_CHECK(net.kind() != comm::BackendKind::Nccl, "host copies need a host communicator");
  const int me = net.rank();
  // Where this rank's files come from, first: a sender that cannot open one stops every copy
  // (no receiver waits for bytes that will not come).
  std::map<int, CopySource> out;
  std::string failure;
  for (const FileCopy& c : copies) {
    if (c.from != me || c.from == c.to || out.count(c.file)) continue;
    try {
      CopySource s = source(c.file);
      const Manifest::File& f = files.at(c.file);
      if (static_cast<int64_t>(s.bytes) != f.bytes)
        throw Error(detail::concat("checkpoint file '", (fs::path(dir) / f.name).string(), "' is ",
                                   s.bytes, " bytes, its manifest says ", f.bytes));
      out.emplace(c.file, std::move(s));
    } catch (const Error& e) {
      failure = e.what();
      break;
    }
  }
  if (!ranks_where(net, !failure.empty()).empty()) return failure;

  // Each pair's files travel as one stream (Sending, Receiving), its chunks under consecutive
  // tags from 0: both sides walk `copies` in the same order, so they agree. Every stream starts
  // at once, a few chunks at a time (all of them when the files are in memory), so no copy
  // waits for another to finish.
  std::map<int, std::vector<CopySource>> to_peer;
  std::map<int, std::vector<Receiving::File>> from_peer;
  for (const FileCopy& c : copies) {
    if (c.from == c.to) continue;
    const Manifest::File& f = files.at(c.file);
    if (c.from == me) to_peer[c.to].push_back(out.at(c.file));
    if (c.to == me) from_peer[c.from].push_back({&f, fs::path(dir) / f.name});
  }
  // A rank refills a window without blocking (a block can deadlock two ranks copying to each
  // other): under MPI it polls its operations; Gloo says a send or receive completed only to a
  // wait, so there each stream has a thread that waits on its operations in turn.
  const bool threaded = net.kind() == comm::BackendKind::Gloo;
  std::vector<std::unique_ptr<Sending>> sends;
  for (auto& [peer, sources] : to_peer)
    sends.push_back(
        std::make_unique<Sending>(net, peer, std::move(sources), chunk_bytes, threaded, options));
  // Receives posted after the sends (a receive may not return before its message is there).
  std::vector<std::unique_ptr<Receiving>> receives;
  for (auto& [peer, incoming] : from_peer)
    receives.push_back(std::make_unique<Receiving>(net, peer, std::move(incoming), chunk_bytes,
                                                   before_write, threaded, options));
  // While a file this rank sends has chunks to post, it polls, sleeping a little longer each
  // time nothing moved; otherwise it blocks on what it waits for (a save: every byte posted).
  const auto timeout = options.timeout;
  auto last_moved = Clock::now();
  auto idle = std::chrono::microseconds(20);
  for (;;) {
    const bool block =
        std::none_of(sends.begin(), sends.end(), [](const auto& s) { return s->posts_more(); });
    bool moved = false;
    for (auto& s : sends)
      while (s->advance(false)) moved = true;
    for (auto& r : receives) {
      while (r && r->advance(false)) moved = true;
      if (r && r->finished()) {
        if (failure.empty()) failure = r->failure();
        r.reset();
      }
    }
    const auto waiting =
        std::find_if(receives.begin(), receives.end(), [](const auto& r) { return r != nullptr; });
    const auto sending =
        std::find_if(sends.begin(), sends.end(), [](const auto& s) { return !s->finished(); });
    if (waiting == receives.end() && sending == sends.end()) break;
    if (!moved && block)
      moved = waiting != receives.end() ? (*waiting)->advance(true) : (*sending)->advance(true);
    if (moved) {
      last_moved = Clock::now();
      idle = std::chrono::microseconds(20);
      continue;
    }
    if (Clock::now() - last_moved > timeout)
      throw comm::communication_timeout(
          waiting != receives.end() ? (*waiting)->oldest()->what() : (*sending)->oldest()->what(),
          timeout);
    std::this_thread::sleep_for(idle);
    idle = std::min(idle * 2, std::chrono::microseconds(2000));
  }
  for (const auto& s : sends)
    if (failure.empty()) failure = s->failure();
  return failure;
}

}  // namespace loom::train

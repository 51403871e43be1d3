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

// One file this rank sends, chunk i under the tag `tag` + i: posted `window` chunks at a time
// (every chunk at once when the source's window is 0), the next read as one completes.
class Sending {
 public:
  Sending(comm::Backend& world, int to, int64_t tag, CopySource source, size_t chunk_bytes,
          const comm::Options& options)
      : world_(world),
        to_(to),
        tag_(tag),
        source_(std::move(source)),
        chunk_bytes_(chunk_bytes),
        options_(options) {
    chunks_ = (source_.bytes + chunk_bytes_ - 1) / chunk_bytes_;
    const size_t window = source_.window == 0 ? chunks_ : source_.window;
    while (next_ < chunks_ && next_ < window) post({});
  }
  // Takes the oldest chunk if it was sent (waits for it when `block`) and posts the next;
  // true when it took one. Throws on a failed or timed-out send.
  bool advance(bool block) {
    if (in_flight_.empty() || (!block && !in_flight_.front().first->test())) return false;
    in_flight_.front().first->wait();
    std::string buf = std::move(in_flight_.front().second);
    in_flight_.pop_front();
    if (next_ < chunks_) post(std::move(buf));
    return true;
  }
  bool finished() const { return in_flight_.empty(); }
  bool posts_more() const { return next_ < chunks_; }  // chunks not yet posted: do not block
  const comm::Work* oldest() const {
    return in_flight_.empty() ? nullptr : in_flight_.front().first.get();
  }
  const std::string& failure() const { return failure_; }

 private:
  void post(std::string buf) {
    const size_t at = next_ * chunk_bytes_, n = std::min(chunk_bytes_, source_.bytes - at);
    // The buffer in its place first: a send reads it until it completes (a short string's
    // bytes would move with it).
    in_flight_.emplace_back(nullptr, std::move(buf));
    std::string& b = in_flight_.back().second;
    std::string_view bytes;
    if (failure_.empty()) {
      try {
        bytes = source_.read(at, n, b);
        if (bytes.size() != n) throw Error(detail::concat("read ", bytes.size(), " bytes of ", n));
      } catch (const Error& e) {
        failure_ = e.what();
      }
    }
    if (!failure_.empty()) {  // the receiver still takes every chunk it waits for
      b.assign(n, '\0');
      bytes = b;
    }
    in_flight_.back().first =
        world_.send(bytes.data(), n, comm::DType::UInt8, to_,
                    tag_of(world_, tag_ + static_cast<int64_t>(next_)), options_);
    ++next_;
  }

  comm::Backend& world_;
  int to_;
  int64_t tag_;
  CopySource source_;
  size_t chunk_bytes_, chunks_ = 0, next_ = 0;
  const comm::Options& options_;
  std::deque<std::pair<comm::WorkPtr, std::string>> in_flight_;  // with their buffers
  std::string failure_;
};

// One file this rank receives from `from` (chunk i under the tag `tag` + i), written chunk by
// chunk as it arrives: at most `window` chunks in memory, whatever the file's size. A chunk that
// cannot be written does not stop the receiving (the sender's messages are taken all the same);
// nothing is left under `path` or a temporary name unless every byte arrived, was written and
// matches the manifest's CRC-32.
class Receiving {
 public:
  Receiving(comm::Backend& world, int from, int64_t tag, const Manifest::File& file,
            const fs::path& path, size_t chunk_bytes,
            const std::function<void(const std::string&)>& before_write,
            const comm::Options& options)
      : world_(world),
        from_(from),
        tag_(tag),
        file_(file),
        path_(path),
        chunk_bytes_(chunk_bytes),
        options_(options) {
    const size_t bytes = static_cast<size_t>(file.bytes);
    chunks_ = (bytes + chunk_bytes - 1) / chunk_bytes;
    try {
      std::error_code ec;
      fs::create_directories(path.parent_path(), ec);
      if (before_write) before_write(path.string());
      // A rank of another host sharing the folder may write the same file at once (the same
      // bytes): the temporary name carries the rank, not the process id.
      out_ = std::make_unique<AtomicFile>(path.string(), "", "-r" + std::to_string(world.rank()));
    } catch (const Error& e) {
      failure_ = e.what();
    }
    buf_.resize(std::min(kWindow, chunks_));
    work_.resize(buf_.size());
    for (size_t i = 0; i < buf_.size(); ++i) post(i);
  }
  // Takes the next chunk if it arrived (waits for it when `block`); true when it took one.
  bool advance(bool block) {
    if (next_ == chunks_) return false;
    comm::WorkPtr& w = work_[next_ % kWindow];
    if (!block && !w->test()) return false;
    w->wait();
    const std::string& b = buf_[next_ % kWindow];
    crc_ = crc32_of(b, crc_);
    if (out_ && failure_.empty()) {
      try {
        out_->write(b);
      } catch (const Error& e) {
        failure_ = e.what();
      }
    }
    if (next_ + kWindow < chunks_) post(next_ + kWindow);
    ++next_;
    return true;
  }
  bool finished() const { return next_ == chunks_; }
  const comm::Work* waiting_on() const {
    return finished() ? nullptr : work_[next_ % kWindow].get();
  }
  // Once finished: the file under its name, checked; returns the failure ("" when none).
  std::string commit() {
    if (!failure_.empty()) {
      out_.reset();  // its temporary file removed
      return failure_;
    }
    try {
      if (crc_ != file_.crc32)
        throw Error(detail::concat("checkpoint file '", path_.string(), "' from rank ", from_,
                                   " arrived damaged (CRC-32 ", crc_, ", its manifest says ",
                                   file_.crc32, ")"));
      out_->commit();
    } catch (const Error& e) {
      out_.reset();
      return e.what();
    }
    return "";
  }

 private:
  static constexpr size_t kWindow = 2;

  void post(size_t i) {
    std::string& b = buf_[i % kWindow];
    b.resize(std::min(chunk_bytes_, static_cast<size_t>(file_.bytes) - i * chunk_bytes_));
    work_[i % kWindow] = world_.recv(b.data(), b.size(), comm::DType::UInt8, from_,
                                     tag_of(world_, tag_ + static_cast<int64_t>(i)), options_);
  }

  comm::Backend& world_;
  int from_;
  int64_t tag_;
  const Manifest::File& file_;
  fs::path path_;
  size_t chunk_bytes_, chunks_ = 0, next_ = 0;
  const comm::Options& options_;
  std::unique_ptr<AtomicFile> out_;
  std::vector<std::string> buf_;
  std::vector<comm::WorkPtr> work_;
  uint32_t crc_ = 0;
  std::string failure_;
};

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
  const int me = world.rank();
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
  if (!ranks_where(world, !failure.empty()).empty()) return failure;

  // Every chunk between two ranks takes the next tag of that pair: both sides walk `copies` in
  // the same order, so their tags agree. Every copy starts at once, a few chunks at a time (all
  // of a file in memory), so no copy waits for another to finish.
  std::map<std::pair<int, int>, int64_t> next_tag;
  std::vector<Sending> sends;
  std::vector<std::pair<const FileCopy*, int64_t>> incoming;  // with its first tag
  std::vector<std::unique_ptr<Receiving>> receives;
  sends.reserve(copies.size());
  for (const FileCopy& c : copies) {
    if (c.from == c.to) continue;
    const Manifest::File& f = files.at(c.file);
    int64_t& tag = next_tag[{c.from, c.to}];
    if (c.from == me) sends.emplace_back(world, c.to, tag, out.at(c.file), chunk_bytes, options);
    if (c.to == me) incoming.emplace_back(&c, tag);
    tag += (f.bytes + static_cast<int64_t>(chunk_bytes) - 1) / static_cast<int64_t>(chunk_bytes);
  }
  // Receives posted after the sends (a receive may not return before its message is there).
  for (const auto& [c, tag] : incoming) {
    const Manifest::File& f = files.at(c->file);
    receives.push_back(std::make_unique<Receiving>(world, c->from, tag, f, fs::path(dir) / f.name,
                                                   chunk_bytes, before_write, options));
  }
  // While a file this rank sends has chunks to post, it polls, sleeping a little longer each
  // time nothing moved; otherwise it blocks on what it waits for (a save: every byte posted).
  const auto timeout = options.timeout;
  auto last_moved = Clock::now();
  auto idle = std::chrono::microseconds(20);
  for (;;) {
    const bool block =
        std::none_of(sends.begin(), sends.end(), [](const Sending& s) { return s.posts_more(); });
    bool moved = false;
    for (Sending& s : sends)
      while (s.advance(false)) moved = true;
    for (auto& r : receives) {
      while (r && r->advance(false)) moved = true;
      if (r && r->finished()) {
        const std::string why = r->commit();
        if (failure.empty()) failure = why;
        r.reset();
      }
    }
    const auto waiting =
        std::find_if(receives.begin(), receives.end(), [](const auto& r) { return r != nullptr; });
    const auto sending =
        std::find_if(sends.begin(), sends.end(), [](const Sending& s) { return !s.finished(); });
    if (waiting == receives.end() && sending == sends.end()) break;
    if (!moved && block)
      moved = waiting != receives.end() ? (*waiting)->advance(true) : sending->advance(true);
    if (moved) {
      last_moved = Clock::now();
      idle = std::chrono::microseconds(20);
      continue;
    }
    if (Clock::now() - last_moved > timeout)
      throw comm::communication_timeout(
          waiting != receives.end() ? (*waiting)->waiting_on()->what() : sending->oldest()->what(),
          timeout);
    std::this_thread::sleep_for(idle);
    idle = std::min(idle * 2, std::chrono::microseconds(2000));
  }
  for (const Sending& s : sends)
    if (failure.empty()) failure = s.failure();
  return failure;
}

}  // namespace loom::train

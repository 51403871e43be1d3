// Checkpoint files carried between hosts (train/host_copies.h): which copies a save and a
// resume plan, and the copies themselves between ranks run as threads, each "host" a folder
// of its own.
#include "loom/train/host_copies.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "../support/fake_backend.h"
#include "loom/common/files.h"

namespace loom::train {
namespace {

namespace fs = std::filesystem;

TEST(HostCopies, EachRanksFileToTheNextGroup) {
  // Hosts of 2, 2 and 1 ranks (groups 0, 2, 4): 0,1 -> 2,3 -> 4 -> 0.
  const std::vector<FileCopy> want = {{0, 0, 2}, {1, 1, 3}, {2, 2, 4}, {3, 3, 4}, {4, 4, 0}};
  EXPECT_EQ(copies_to_next_group({0, 0, 2, 2, 4}), want);
  // One folder for all (a shared file system, or one host): nothing to copy.
  EXPECT_TRUE(copies_to_next_group({0, 0, 0, 0}).empty());
  // Ranks seeing rank 0's folder from two hosts (group 0), a host of its own (group 3).
  const std::vector<FileCopy> two = {{0, 0, 3}, {1, 1, 3}, {2, 2, 3}, {3, 3, 0}};
  EXPECT_EQ(copies_to_next_group({0, 0, 0, 3}), two);
  // output.host_copies = 2 on hosts of 2, 2 and 1 ranks: each file on the next two hosts, i.e.
  // on every host; asking for more than there are other hosts gives the same.
  const std::vector<FileCopy> twice = {{0, 0, 2}, {0, 0, 4}, {1, 1, 3}, {1, 1, 4}, {2, 2, 4},
                                       {2, 2, 0}, {3, 3, 4}, {3, 3, 1}, {4, 4, 0}, {4, 4, 2}};
  EXPECT_EQ(copies_to_next_group({0, 0, 2, 2, 4}, 2), twice);
  EXPECT_EQ(copies_to_next_group({0, 0, 2, 2, 4}, 5), twice);
  // Four hosts of one rank, two copies: the next two hosts.
  const std::vector<FileCopy> four = {{0, 0, 1}, {0, 0, 2}, {1, 1, 2}, {1, 1, 3},
                                      {2, 2, 3}, {2, 2, 0}, {3, 3, 0}, {3, 3, 1}};
  EXPECT_EQ(copies_to_next_group({0, 1, 2, 3}, 2), four);
  EXPECT_EQ(copies_to_next_group({0, 1, 2, 3}, 1), copies_to_next_group({0, 1, 2, 3}));
}

TEST(HostCopies, FetchesWhatAHostLacksOnceFromAHolder) {
  // Two hosts of two ranks; files 0-3. Host 0 (ranks 0, 1) holds 0, 1 and a copy of 2, 3;
  // host 1 lost its disk: it holds nothing.
  const std::vector<int> group = {0, 0, 2, 2};
  std::vector<std::vector<bool>> here = {{true, true, true, true},
                                         {true, true, true, true},
                                         {false, false, false, false},
                                         {false, false, false, false}};
  // Every rank reads two files (a dp 4 resume of a pp 2 checkpoint, say).
  std::vector<std::vector<bool>> need = {{true, false, true, false},
                                         {false, true, false, true},
                                         {true, false, true, false},
                                         {false, true, false, true}};
  // Host 1 gets files 0 and 2 (rank 2 needs them first), 1 and 3 (rank 3), each once, from
  // host 0; the senders take the holders in turn.
  const std::vector<FileCopy> want = {{0, 0, 2}, {1, 1, 3}, {2, 0, 2}, {3, 1, 3}};
  EXPECT_EQ(fetches(group, here, need), want);
  // Nothing to fetch when every host holds what its ranks read.
  EXPECT_TRUE(fetches(group, here,
                      {{true, false, false, false},
                       {false, true, false, false},
                       {false, false, false, false},
                       {false, false, false, false}})
                  .empty());
  // A file no rank holds is left out (the resume then says the checkpoint is incomplete).
  here[0][3] = here[1][3] = false;
  const std::vector<FileCopy> without = {{0, 0, 2}, {1, 1, 3}, {2, 0, 2}};
  EXPECT_EQ(fetches(group, here, need), without);
  // A file on the receiving host already (another rank of it holds it): not fetched; a file
  // whose only holder is on a third host comes from there.
  const std::vector<FileCopy> third = {{1, 2, 0}};
  EXPECT_EQ(fetches({0, 0, 2}, {{true, false}, {false, false}, {false, true}},
                    {{false, true}, {true, false}, {false, false}}),
            third);
  // `loom checkpoint gather` on three hosts of one rank, after a save's ring 0 -> 1 -> 2 -> 0
  // (each holds its own file and the previous host's): rank 0 needs every file and lacks only
  // host 1's, which comes from the first of its holders.
  const std::vector<FileCopy> gather = {{1, 1, 0}};
  EXPECT_EQ(fetches({0, 1, 2}, {{true, false, true}, {true, true, false}, {false, true, true}},
                    {{true, true, true}, {false, false, false}, {false, false, false}}),
            gather);
}

// The backend the thread ranks' communicator says it is, set by each test of HostCopiesUnder
// (the tests run one at a time): how run_copies sees operations complete.
comm::BackendKind backend = comm::BackendKind::Mpi;

// Ranks as threads, with an all-reduce (sum) by rendezvous and messages as MPI moves large
// ones: a send completes only once its receiver took the bytes (nothing buffered), a receive
// once it found its message. Counts, by sender, the sends posted and not taken yet.
struct Hub {
  comm::BackendKind kind = backend;
  Hub* host = nullptr;  // the ranks' host_world() (under NCCL): a hub of its own
  struct Posted {
    const char* bytes;
    size_t size;
    bool taken = false;
  };
  std::mutex mu;
  std::condition_variable cv;
  int size = 0, arrived = 0, generation = 0;
  std::vector<int64_t> sum, result;
  std::map<std::tuple<int, int, int>, std::shared_ptr<Posted>> box;  // (from, to, tag)
  std::vector<int> posted, most_posted;                              // by sender
  int broadcasts = 0;                                                // by all ranks
  // The tags of each pair's sends and receives (from, to), in the order they were posted.
  std::map<std::pair<int, int>, std::vector<int>> send_order, recv_order;
};

// Complete once `done` (called with the hub's lock held, until it said so once) says so. A
// send's completion is seen by the second poll after it happened, as an MPI send's may lag
// its receive; a wait sees it at once. As Gloo's, a poll never sees it: only a wait does.
class HubWork : public comm::Work {
 public:
  HubWork(Hub& hub, std::function<bool()> done, const comm::Backend::Call& c, bool lags)
      : Work(c.what, c.options.timeout), hub_(hub), done_(std::move(done)), lags_(lags) {}

 protected:
  bool completed() override {
    std::lock_guard<std::mutex> lock(hub_.mu);
    if (hub_.kind == comm::BackendKind::Gloo || !is_done()) return false;
    return !lags_ || polled_done_++ > 0;
  }
  bool block_until(std::chrono::steady_clock::time_point deadline) override {
    std::unique_lock<std::mutex> lock(hub_.mu);
    return hub_.cv.wait_until(lock, deadline, [this] { return is_done(); });
  }

 private:
  bool is_done() { return done_seen_ || (done_seen_ = done_()); }

  Hub& hub_;
  std::function<bool()> done_;
  bool lags_, done_seen_ = false;
  int polled_done_ = 0;
};

class HubComm : public test::FakeBackend {
 public:
  HubComm(Hub& hub, int rank, int size) : FakeBackend("world", rank, size), hub_(hub) {}
  comm::BackendKind kind() const override { return hub_.kind; }

 protected:
  std::unique_ptr<Backend> make_host_world() override {
    if (!hub_.host) return nullptr;
    return std::make_unique<HubComm>(*hub_.host, rank(), size());
  }

 protected:
  comm::WorkPtr do_all_reduce(const at::Tensor& t, comm::ReduceOp, const Call&) override {
    at::Tensor v = t.to(at::kLong);
    std::unique_lock<std::mutex> lock(hub_.mu);
    if (hub_.arrived == 0) hub_.sum.assign(static_cast<size_t>(v.numel()), 0);
    for (int64_t i = 0; i < v.numel(); ++i) hub_.sum[i] += v.data_ptr<int64_t>()[i];
    const int gen = hub_.generation;
    if (++hub_.arrived == hub_.size) {
      hub_.result = hub_.sum;
      hub_.arrived = 0;
      ++hub_.generation;
      hub_.cv.notify_all();
    } else {
      hub_.cv.wait(lock, [&] { return hub_.generation != gen; });
    }
    for (int64_t i = 0; i < v.numel(); ++i) v.data_ptr<int64_t>()[i] = hub_.result[i];
    t.copy_(v);
    return done();
  }
  // The root's bytes summed with every other rank's zeros.
  comm::WorkPtr do_broadcast(const at::Tensor& t, int root, const Call& c) override {
    {
      std::lock_guard<std::mutex> lock(hub_.mu);
      ++hub_.broadcasts;
    }
    if (rank() != root) t.zero_();
    return do_all_reduce(t, comm::ReduceOp::Sum, c);
  }
  comm::WorkPtr do_send(const at::Tensor& t, int dst, int tag, const Call& c) override {
    auto p = std::make_shared<Hub::Posted>(
        Hub::Posted{static_cast<const char*>(t.data_ptr()), t.nbytes()});
    {
      std::lock_guard<std::mutex> lock(hub_.mu);
      EXPECT_EQ(hub_.box.count({rank(), dst, tag}), 0u) << "two messages under one tag";
      hub_.box[{rank(), dst, tag}] = p;
      hub_.send_order[{rank(), dst}].push_back(tag);
      const int n = ++hub_.posted[rank()];
      hub_.most_posted[rank()] = std::max(hub_.most_posted[rank()], n);
    }
    hub_.cv.notify_all();  // a receiver may wait for it
    return std::make_shared<HubWork>(
        hub_, [p] { return p->taken; }, c, true);
  }
  comm::WorkPtr do_recv(const at::Tensor& t, int src, int tag, const Call& c) override {
    const auto key = std::make_tuple(src, rank(), tag);
    {
      std::lock_guard<std::mutex> lock(hub_.mu);
      hub_.recv_order[{src, rank()}].push_back(tag);
    }
    auto take = [this, t, key, src] {
      const auto it = hub_.box.find(key);
      if (it == hub_.box.end()) return false;
      EXPECT_EQ(it->second->size, t.nbytes());
      std::memcpy(t.data_ptr(), it->second->bytes, std::min(it->second->size, t.nbytes()));
      it->second->taken = true;
      --hub_.posted[src];
      hub_.box.erase(it);
      hub_.cv.notify_all();
      return true;
    };
    return std::make_shared<HubWork>(hub_, take, c, false);
  }

 private:
  Hub& hub_;
};

// Runs run_copies on `n` thread ranks, rank r's folder `folder[r]`, its files' bytes
// source(r, i); returns their failures. `hub` (optional) is left for the caller to inspect.
std::vector<std::string> copy_from(const std::vector<FileCopy>& copies,
                                   const std::vector<Manifest::File>& files,
                                   const std::vector<std::string>& folder,
                                   const std::function<CopySource(int, int)>& source,
                                   size_t chunk_bytes = size_t{16} << 20,
                                   const std::function<void(const std::string&)>& before_write = {},
                                   const comm::Options& options = {}, Hub* hub_out = nullptr) {
  const int n = static_cast<int>(folder.size());
  Hub own;
  Hub& hub = hub_out ? *hub_out : own;
  for (Hub* h = &hub; h; h = h->host) {
    h->size = n;
    h->posted.assign(n, 0);
    h->most_posted.assign(n, 0);
  }
  std::vector<std::string> failures(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      HubComm comm(hub, r, n);
      try {
        failures[r] = run_copies(
            comm, copies, files, folder[r], [&](int i) { return source(r, i); }, before_write,
            chunk_bytes, options);
      } catch (const Error& e) {
        failures[r] = std::string("threw: ") + e.what();
      }
    });
  for (auto& t : ranks) t.join();
  if (!hub_out) {
    EXPECT_TRUE(hub.box.empty()) << "a chunk was sent that nobody received";
  }
  return failures;
}

// As copy_from, each rank's files' bytes in memory: content(r, i).
std::vector<std::string> copy_between(
    const std::vector<FileCopy>& copies, const std::vector<Manifest::File>& files,
    const std::vector<std::string>& folder, const std::function<std::string(int, int)>& content,
    size_t chunk_bytes = size_t{16} << 20,
    const std::function<void(const std::string&)>& before_write = {}) {
  std::mutex mu;
  std::map<std::pair<int, int>, std::string> held;  // kept until every rank returned
  auto source = [&](int r, int i) {
    std::string bytes = content(r, i);
    std::lock_guard<std::mutex> lock(mu);
    return in_memory(held[{r, i}] = std::move(bytes));
  };
  return copy_from(copies, files, folder, source, chunk_bytes, before_write);
}

// The copies under each backend's way of seeing operations complete: MPI's polls, Gloo's
// waits (a thread for each stream).
class HostCopiesUnder : public testing::TestWithParam<comm::BackendKind> {
 protected:
  void SetUp() override { backend = GetParam(); }
  void TearDown() override { backend = comm::BackendKind::Mpi; }
};

INSTANTIATE_TEST_SUITE_P(Backends, HostCopiesUnder,
                         testing::Values(comm::BackendKind::Mpi, comm::BackendKind::Gloo),
                         [](const auto& info) {
                           return std::string(comm::backend_name(info.param));
                         });

TEST_P(HostCopiesUnder, CopiesArriveWholeAndDamageIsNamed) {
  const fs::path root =
      fs::temp_directory_path() / ("loom-host-copies-" + std::to_string(getpid()));
  fs::remove_all(root);
  const std::vector<std::string> folder = {(root / "h0").string(), (root / "h0").string(),
                                           (root / "h1" / "step").string(),
                                           (root / "h1" / "step").string()};
  // Four rank files of different sizes, one empty; each rank's own content.
  std::vector<std::string> bytes = {std::string(1000, 'a'), std::string(77, 'b'), "",
                                    std::string(3, 'd')};
  std::vector<Manifest::File> files;
  for (int r = 0; r < 4; ++r)
    files.push_back({"rank-" + std::to_string(r) + ".pt",
                     static_cast<int64_t>(bytes[r].size()),
                     crc32_of(bytes[r]),
                     0,
                     {}});
  const std::vector<FileCopy> ring = copies_to_next_group({0, 0, 2, 2});
  auto own = [&](int r, int i) {
    EXPECT_EQ(r, i) << "rank " << r << " asked for another rank's file";
    return bytes[i];
  };
  for (const std::string& f : copy_between(ring, files, folder, own)) EXPECT_EQ(f, "");
  for (int r = 0; r < 4; ++r) {
    const fs::path at = fs::path(r < 2 ? folder[2] : folder[0]) / files[r].name;
    EXPECT_EQ(read_file(at.string()), bytes[r]) << at;
  }
  // Nothing but the files (no temporary names left).
  size_t entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 4u);

  // Two copies of each file on three hosts (output.host_copies = 2): every host gets every
  // file of the others, each sender's file going to two peers at once.
  fs::remove_all(root);
  const std::vector<std::string> three = {(root / "a").string(), (root / "a").string(),
                                          (root / "b").string(), (root / "c").string()};
  for (const std::string& f : copy_between(
           copies_to_next_group({0, 0, 2, 3}, 2), files, three,
           [&](int, int i) { return bytes[i]; }, 7))
    EXPECT_EQ(f, "");
  for (int r = 0; r < 4; ++r)
    for (int i = 0; i < 4; ++i) {
      const fs::path at = fs::path(three[r]) / files[i].name;
      if (three[i] == three[r])  // its own host's file: written by the save, not copied
        EXPECT_FALSE(fs::exists(at)) << at;
      else
        EXPECT_EQ(read_file(at.string()), bytes[i]) << at;
    }

  // In chunks of 7 bytes (the 1000-byte file in 143 messages, the others in 11, 0 and 1; two
  // files between one pair of ranks): each chunk's tag follows the pair's last.
  fs::remove_all(root);
  const std::vector<FileCopy> both = {{0, 0, 2}, {1, 0, 2}, {2, 2, 0}, {3, 3, 1}};
  auto any = [&](int, int i) { return bytes[i]; };
  for (const std::string& f : copy_between(both, files, folder, any, 7)) EXPECT_EQ(f, "");
  for (int i : {0, 1})
    EXPECT_EQ(read_file((fs::path(folder[2]) / files[i].name).string()), bytes[i]);
  for (int i : {2, 3})
    EXPECT_EQ(read_file((fs::path(folder[0]) / files[i].name).string()), bytes[i]);

  // Bytes that changed on the way (here: at the sender) fail the CRC-32 on arrival: the
  // receiver names the file and the sender, and writes nothing.
  fs::remove_all(root);
  auto damaged = [&](int, int i) {
    std::string b = bytes[i];
    if (i == 1) b[5] = 'x';
    return b;
  };
  const std::vector<std::string> failures = copy_between(ring, files, folder, damaged);
  EXPECT_NE(failures[3].find("rank-1.pt' from rank 1 arrived damaged"), std::string::npos)
      << failures[3];
  EXPECT_EQ(failures[2], "");
  EXPECT_FALSE(fs::exists(fs::path(folder[2]) / files[1].name));
  EXPECT_TRUE(fs::exists(fs::path(folder[2]) / files[0].name));
  // In chunks too (the damage found after the file was written chunk by chunk): no temporary
  // name is left behind.
  fs::remove_all(root);
  EXPECT_NE(copy_between(ring, files, folder, damaged, 7)[3].find("arrived damaged"),
            std::string::npos);
  EXPECT_EQ(std::distance(fs::directory_iterator(folder[2]), fs::directory_iterator()), 1);

  // A receiver that cannot write (its disk full as the file arrives) still takes every chunk
  // (no sender is left waiting: copy_between checks that no message stays unreceived) and
  // leaves nothing of that file; the other copies arrive.
  fs::remove_all(root);
  auto disk_full = [&](const std::string& path) {
    if (path.ends_with("rank-0.pt")) throw Error("cannot write '" + path + "': No space left");
  };
  const std::vector<std::string> full = copy_between(ring, files, folder, any, 7, disk_full);
  EXPECT_NE(full[2].find("rank-0.pt': No space left"), std::string::npos) << full[2];
  EXPECT_EQ(full[3], "");
  EXPECT_EQ(std::distance(fs::directory_iterator(folder[2]), fs::directory_iterator()), 1);
  EXPECT_EQ(read_file((fs::path(folder[2]) / files[1].name).string()), bytes[1]);

  // A sender that cannot read its file stops every copy before a byte moves.
  fs::remove_all(root);
  auto unreadable = [&](int, int i) -> std::string {
    if (i == 2) throw Error("cannot read 'rank-2.pt': Input/output error");
    return bytes[i];
  };
  const std::vector<std::string> stopped = copy_between(ring, files, folder, unreadable);
  EXPECT_EQ(stopped[2], "cannot read 'rank-2.pt': Input/output error");
  EXPECT_FALSE(fs::exists(root / "h1"));
  EXPECT_FALSE(fs::exists(root / "h0"));
  fs::remove_all(root);
}

// Two "hosts" of one rank each, a file on each: rank 0's (1000 bytes) and rank 1's (1500).
struct TwoHosts {
  fs::path root = fs::temp_directory_path() / ("loom-host-fetch-" + std::to_string(getpid()));
  std::vector<std::string> folder = {(root / "h0").string(), (root / "h1").string()};
  std::vector<std::string> bytes;
  std::vector<Manifest::File> files;

  TwoHosts() {
    fs::remove_all(root);
    for (int r = 0; r < 2; ++r) {
      std::string b(r == 0 ? 1000 : 1500, ' ');
      for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<char>('a' + (k * 7 + r) % 26);
      files.push_back({"rank-" + std::to_string(r) + ".pt",
                       static_cast<int64_t>(b.size()),
                       crc32_of(b),
                       0,
                       {}});
      bytes.push_back(b);
      fs::create_directories(folder[r]);
      write_file_atomic(at(r, r), b);
    }
  }
  ~TwoHosts() { fs::remove_all(root); }
  std::string at(int host, int file) const {
    return (fs::path(folder[host]) / files[file].name).string();
  }
  CopySource from_disk(int r, int i) const { return from_file(at(r, i)); }
  size_t entries(int host) const {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(folder[host]), fs::directory_iterator()));
  }
};

TEST_P(HostCopiesUnder, FilesSentFromDiskBothWaysTwoChunksAtATime) {
  TwoHosts h;
  const std::vector<FileCopy> both = {{0, 0, 1}, {1, 1, 0}};
  auto disk = [&](int r, int i) { return h.from_disk(r, i); };
  Hub hub;
  // In chunks of 7 bytes: 143 and 215 messages each way, every send waiting for its receiver.
  for (const std::string& f : copy_from(both, h.files, h.folder, disk, 7, {}, {}, &hub))
    EXPECT_EQ(f, "");
  EXPECT_TRUE(hub.box.empty()) << "a chunk was sent that nobody received";
  EXPECT_EQ(read_file(h.at(1, 0)), h.bytes[0]);
  EXPECT_EQ(read_file(h.at(0, 1)), h.bytes[1]);
  // Each sender held two chunks of its file at most, whatever its size ...
  EXPECT_EQ(hub.most_posted, std::vector<int>({2, 2}));
  // ... where the same bytes in memory go all at once (a save's own file; how many are still
  // posted when the last is depends on how soon the receiver's thread takes the first).
  std::string held = h.bytes[0];
  Hub all;
  fs::remove(h.at(1, 0));
  auto memory = [&](int, int) { return in_memory(held); };
  EXPECT_EQ(copy_from({{0, 0, 1}}, h.files, h.folder, memory, 7, {}, {}, &all)[1], "");
  EXPECT_GT(all.most_posted[0], 2);
  EXPECT_EQ(read_file(h.at(1, 0)), h.bytes[0]);

  // Two files each way between the pair (a host fetching two ranks' files from one holder),
  // of 43, 143, 100 and 215 chunks, one empty too: each pair's chunks are posted in one order
  // on both sides, as NCCL (which matches a pair's messages by order, not tag) needs.
  fs::remove_all(h.root);
  TwoHosts more;
  std::vector<Manifest::File> files = more.files;
  std::vector<std::string> bytes = more.bytes;
  for (const size_t size : {300, 700, 0}) {
    const int i = static_cast<int>(files.size());
    std::string b(size, ' ');
    for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<char>('A' + (k * 5 + i) % 26);
    files.push_back(
        {"rank-" + std::to_string(i) + ".pt", static_cast<int64_t>(size), crc32_of(b), 0, {}});
    bytes.push_back(b);
    write_file_atomic((fs::path(more.folder[i % 2]) / files[i].name).string(), b);
  }
  const std::vector<FileCopy> pairs = {{0, 0, 1}, {1, 1, 0}, {2, 0, 1}, {3, 1, 0}, {4, 0, 1}};
  auto from_own = [&](int r, int i) {
    return from_file((fs::path(more.folder[r]) / files[i].name).string());
  };
  Hub two;
  for (const std::string& f : copy_from(pairs, files, more.folder, from_own, 7, {}, {}, &two))
    EXPECT_EQ(f, "");
  for (const FileCopy& c : pairs)
    EXPECT_EQ(read_file((fs::path(more.folder[c.to]) / files[c.file].name).string()),
              bytes[c.file]);
  for (const auto& pair : {std::make_pair(0, 1), std::make_pair(1, 0)}) {
    EXPECT_EQ(two.send_order[pair], two.recv_order[pair]) << pair.first << " -> " << pair.second;
    EXPECT_EQ(two.send_order[pair].size(), pair.first == 0 ? 143u + 43u : 215u + 100u);
  }
}

// Under NCCL the files go over the world's host_world() (a Gloo group beside it in loom's c10d
// backend): not staged through the GPU, and never posted as NCCL sends and receives both ways
// between a pair, which NCCL would need grouped.
TEST(HostCopies, UnderNcclTheFilesGoOverTheHostWorld) {
  TwoHosts h;
  const std::vector<FileCopy> both = {{0, 0, 1}, {1, 1, 0}};
  auto disk = [&](int r, int i) { return h.from_disk(r, i); };
  Hub gloo;
  gloo.kind = comm::BackendKind::Gloo;
  Hub nccl;
  nccl.kind = comm::BackendKind::Nccl;
  nccl.host = &gloo;
  for (const std::string& f : copy_from(both, h.files, h.folder, disk, 7, {}, {}, &nccl))
    EXPECT_EQ(f, "");
  EXPECT_EQ(read_file(h.at(1, 0)), h.bytes[0]);
  EXPECT_EQ(read_file(h.at(0, 1)), h.bytes[1]);
  EXPECT_TRUE(nccl.send_order.empty() && nccl.recv_order.empty()) << "a chunk went over NCCL";
  EXPECT_EQ(gloo.send_order[std::make_pair(0, 1)].size(), 143u);
  EXPECT_EQ(gloo.most_posted, std::vector<int>({2, 2}));
  EXPECT_TRUE(gloo.box.empty()) << "a chunk was sent that nobody received";
}

// A manifest's or metrics.jsonl's text goes over the host world too.
TEST(HostCopies, TextIsBroadcastOverTheHostWorld) {
  Hub gloo;
  gloo.kind = comm::BackendKind::Gloo;
  Hub nccl;
  nccl.kind = comm::BackendKind::Nccl;
  nccl.host = &gloo;
  for (Hub* h : {&nccl, &gloo}) h->size = 3;
  const std::string manifest(5000, 'm');
  std::vector<std::string> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      HubComm comm(nccl, r, 3);
      got[r] = r == 1 ? manifest : "stale";
      broadcast_text(comm, got[r], 1);
    });
  for (auto& t : ranks) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, manifest);
  EXPECT_EQ(nccl.broadcasts, 0);
  EXPECT_EQ(gloo.broadcasts, 6);  // the length and the bytes, on each rank
}

TEST_P(HostCopiesUnder, ASenderThatCannotReadFailsItsCopyOnly) {
  TwoHosts h;
  const std::vector<FileCopy> both = {{0, 0, 1}, {1, 1, 0}};
  // A read that fails inside the file (a disk's I/O error at byte 70): the receiver still
  // takes every chunk, finds the file damaged and keeps nothing of it; the other copy arrives.
  auto failing = [&](int r, int i) {
    CopySource s = h.from_disk(r, i);
    if (i == 0)
      s.read = [read = s.read](size_t at, size_t n, std::string& buf) {
        if (at >= 70) throw Error("cannot read 'rank-0.pt': Input/output error");
        return read(at, n, buf);
      };
    return s;
  };
  const std::vector<std::string> failed = copy_from(both, h.files, h.folder, failing, 7);
  EXPECT_EQ(failed[0], "cannot read 'rank-0.pt': Input/output error");
  EXPECT_NE(failed[1].find("rank-0.pt' from rank 0 arrived damaged"), std::string::npos)
      << failed[1];
  EXPECT_EQ(h.entries(1), 1u);  // its own file, nothing of rank 0's
  EXPECT_EQ(read_file(h.at(0, 1)), h.bytes[1]);

  // A file shorter than its manifest says, or missing: every copy stops before a byte moves.
  fs::remove(h.at(0, 1));
  write_file_atomic(h.at(0, 0), h.bytes[0].substr(0, 999));
  auto disk = [&](int r, int i) { return h.from_disk(r, i); };
  const std::vector<std::string> short_file = copy_from(both, h.files, h.folder, disk, 7);
  EXPECT_NE(short_file[0].find("rank-0.pt' is 999 bytes, its manifest says 1000"),
            std::string::npos)
      << short_file[0];
  EXPECT_EQ(short_file[1], "");
  fs::remove(h.at(0, 0));
  const std::vector<std::string> missing = copy_from(both, h.files, h.folder, disk, 7);
  EXPECT_NE(missing[0].find("cannot read '" + h.at(0, 0) + "': No such file"), std::string::npos)
      << missing[0];
  EXPECT_EQ(h.entries(0), 0u);
  EXPECT_EQ(h.entries(1), 1u);
}

TEST_P(HostCopiesUnder, APeerThatNeverTakesOrSendsTimesOut) {
  TwoHosts h;
  const comm::Options quick{std::chrono::milliseconds(300)};
  // Rank 0 sends rank 1 its file; rank 1 (a peer out of step) expects nothing, or the reverse.
  auto run = [&](const std::vector<FileCopy>& of0, const std::vector<FileCopy>& of1) {
    Hub hub;
    hub.size = 2;
    hub.posted.assign(2, 0);
    hub.most_posted.assign(2, 0);
    std::vector<std::string> out(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        HubComm comm(hub, r, 2);
        try {
          out[r] = run_copies(
              comm, r == 0 ? of0 : of1, h.files, h.folder[r],
              [&](int i) { return h.from_disk(r, i); }, {}, 7, quick);
        } catch (const Error& e) {
          out[r] = e.what();
        }
      });
    for (auto& t : ranks) t.join();
    return out;
  };
  // A sender polling its window (its file has chunks left to post) ...
  const std::vector<std::string> sender = run({{0, 0, 1}}, {});
  EXPECT_NE(sender[0].find("communication timeout: send("), std::string::npos) << sender[0];
  EXPECT_NE(sender[0].find("within 0.3 s"), std::string::npos) << sender[0];
  EXPECT_EQ(sender[1], "");
  // ... and a receiver waiting for a chunk, each name what it waits on.
  const std::vector<std::string> receiver = run({}, {{0, 0, 1}});
  EXPECT_NE(receiver[1].find("communication timeout: recv("), std::string::npos) << receiver[1];
  EXPECT_EQ(h.entries(1), 1u);  // no temporary file left
}

}  // namespace
}  // namespace loom::train

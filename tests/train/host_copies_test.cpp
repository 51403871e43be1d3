// Checkpoint files carried between hosts (train/host_copies.h): which copies a save and a
// resume plan, and the copies themselves between ranks run as threads, each "host" a folder
// of its own.
#include "loom/train/host_copies.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "../support/thread_comm.h"
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
}

// Ranks as threads (tests/support/thread_comm.h), with an all-reduce (sum) by rendezvous.
struct Hub : test::Mailbox {
  int size = 0, arrived = 0, generation = 0;
  std::vector<int64_t> sum, result;
};

class SummingComm : public test::ThreadComm {
 public:
  SummingComm(Hub& hub, int rank, int size) : ThreadComm(hub, "world", rank, size), hub_(hub) {}

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

 private:
  Hub& hub_;
};

// Runs run_copies on `n` thread ranks, rank r's folder `folder[r]`; returns their failures.
std::vector<std::string> copy_between(
    const std::vector<FileCopy>& copies, const std::vector<Manifest::File>& files,
    const std::vector<std::string>& folder, const std::function<std::string(int, int)>& content,
    size_t chunk_bytes = size_t{16} << 20,
    const std::function<void(const std::string&)>& before_write = {}) {
  const int n = static_cast<int>(folder.size());
  Hub hub;
  hub.size = n;
  std::vector<std::string> failures(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      SummingComm comm(hub, r, n);
      std::map<int, std::string> held;  // what the rank sends, kept until run_copies returns
      failures[r] = run_copies(
          comm, copies, files, folder[r],
          [&](int i) { return std::string_view(held[i] = content(r, i)); }, before_write,
          chunk_bytes);
    });
  for (auto& t : ranks) t.join();
  EXPECT_TRUE(hub.box.empty()) << "a chunk was sent that nobody received";
  return failures;
}

TEST(HostCopies, CopiesArriveWholeAndDamageIsNamed) {
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

}  // namespace
}  // namespace loom::train

// Checkpoint files of chunks (train/chunk_file.h, parallel/state_chunks.h): a synchronous
// save's chunks borrow the state instead of copying it, the file is written as it is
// serialized, and either way the file is the same bytes; a whole checkpoint is assembled
// piece by piece as its files are read; a resume under another layout keeps of each file only
// what its stages ask for.
#include "loom/train/chunk_file.h"

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "loom/common/error.h"
#include "loom/common/files.h"

namespace {

namespace fs = std::filesystem;
using loom::parallel::ChunkSet;
using loom::parallel::ChunkWriter;
using loom::train::FileSum;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("chunk_file_test." + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

// A stage's state as a save finds it: a flat buffer whose pieces are parameters (and a ZeRO
// shard's slices), a tensor of its own, an int64 counter.
void put_state(ChunkWriter& w, const torch::Tensor& flat, const torch::Tensor& own) {
  w.put("param/a", -1, 0, {2, 3}, flat.slice(0, 0, 6).view({2, 3}));
  w.put("param/b", -1, 2, {10}, flat.slice(0, 6, 14));  // elements [2, 10) of b
  w.put("adamw.exp_avg/c", 0, 0, {4}, own);
  w.put("optimizer.step", -1, 0, {1}, torch::tensor({int64_t{7}}, torch::kInt64));
}

// An RNG state as a generator gives it: bytes.
torch::Tensor rng_state() {
  return torch::tensor({1, 2, 250}, torch::kUInt8);
}

FileSum write(const fs::path& path, ChunkWriter& w) {
  loom::AtomicFile file(path.string());
  const FileSum sum = loom::train::write_chunks(file, w.chunks(), rng_state());
  file.commit();
  return sum;
}

TEST(ChunkWriter, BorrowedChunksAreExactlyTheirPieceOfTheState) {
  const torch::Tensor flat = torch::arange(16, torch::kFloat32);
  const torch::Tensor own = torch::ones({4});
  ChunkWriter borrowed(/*borrow=*/true), copied;
  put_state(borrowed, flat, own);
  put_state(copied, flat, own);
  const auto& b = borrowed.chunks();
  ASSERT_EQ(b.size(), 4u);
  // The slice's memory, not a copy, in a tensor whose storage is that memory only (a file
  // stores a tensor's whole storage).
  EXPECT_EQ(b[1].data.data_ptr<float>(), flat.data_ptr<float>() + 6);
  EXPECT_EQ(b[1].data.storage().nbytes(), 8 * sizeof(float));
  EXPECT_EQ(b[0].data.storage().nbytes(), 6 * sizeof(float));
  EXPECT_EQ(b[2].data.data_ptr<float>(), own.data_ptr<float>());  // a tensor of its own: itself
  for (const auto& c : copied.chunks()) {
    EXPECT_NE(c.data.data_ptr(), flat.data_ptr());
    EXPECT_NE(c.data.data_ptr(), own.data_ptr());
  }
  // The borrowed piece keeps the state it came from alive.
  torch::Tensor kept = b[1].data;
  borrowed.chunks().clear();
  EXPECT_FLOAT_EQ(kept[0].item<float>(), 6.0f);
}

TEST(ChunkWriter, PutCopyCopiesEvenWhenBorrowing) {
  std::vector<float> buffer{1, 2, 3};
  ChunkWriter w(/*borrow=*/true);
  w.put_copy("slim.core/a", -1, 0, {3}, torch::from_blob(buffer.data(), {3}, torch::kFloat32));
  buffer.assign(3, 0.0f);
  EXPECT_FLOAT_EQ(w.chunks()[0].data[2].item<float>(), 3.0f);
}

TEST(ChunkFile, BorrowedAndCopiedStateWriteTheSameBytes) {
  TempDir dir;
  const torch::Tensor flat = torch::randn({16});
  const torch::Tensor own = torch::randn({4});
  ChunkWriter borrowed(true), copied;
  put_state(borrowed, flat, own);
  put_state(copied, flat, own);
  const FileSum a = write(dir.path / "rank-00000.pt", borrowed);
  const FileSum b = write(dir.path / "copied.pt", copied);
  const std::string bytes = loom::read_file((dir.path / "rank-00000.pt").string());
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.crc32, b.crc32);
  EXPECT_EQ(a.bytes, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(a.crc32, loom::train::crc32_of(bytes));
  EXPECT_EQ(bytes, loom::read_file((dir.path / "copied.pt").string()));
  // `keep`: the same bytes in memory.
  std::string kept;
  loom::AtomicFile again((dir.path / "kept.pt").string());
  EXPECT_EQ(loom::train::write_chunks(again, borrowed.chunks(), rng_state(), &kept).crc32, a.crc32);
  EXPECT_EQ(kept, bytes);

  // Read back (checked against its size and CRC-32), every value where it was.
  loom::train::Manifest m;
  m.files = {{"rank-00000.pt", a.bytes, a.crc32, 0, {0}}};
  ChunkSet set;
  const torch::Tensor rng = loom::train::read_checkpoint_file(dir.path.string(), m, 0, set);
  EXPECT_TRUE(rng.equal(rng_state()));
  torch::Tensor out = torch::empty({6});
  ASSERT_TRUE(set.get("param/a", -1, 0, out));
  EXPECT_TRUE(out.equal(flat.slice(0, 0, 6)));
  out = torch::empty({8});
  ASSERT_TRUE(set.get("param/b", -1, 2, out));
  EXPECT_TRUE(out.equal(flat.slice(0, 6, 14)));
  out = torch::empty({4});
  ASSERT_TRUE(set.get("adamw.exp_avg/c", 0, 0, out));
  EXPECT_TRUE(out.equal(own));

  // A file whose CRC-32 is not the manifest's is refused, naming it.
  m.files[0].crc32 ^= 1;
  ChunkSet none;
  try {
    loom::train::read_checkpoint_file(dir.path.string(), m, 0, none);
    ADD_FAILURE() << "a wrong CRC-32 was accepted";
  } catch (const loom::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00000.pt' does not match its manifest"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChunkFile, AWriteThatFailsMidFileThrowsNamingTheFile) {
  // A file size limit below the archive's size fails a write() in the middle of it (EFBIG),
  // inside the serializer's callback: the failure comes out of write_chunks (not through the
  // serializer's C code) and the temporary file goes.
  TempDir dir;
  ChunkWriter w;
  put_state(w, torch::zeros({16}), torch::zeros({4}));
  w.put("param/big", -1, 0, {4096}, torch::zeros({4096}));
  const fs::path path = dir.path / "rank-00000.pt";
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &before), 0);
  rlimit was{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &was), 0);
  rlimit small = was;
  small.rlim_cur = 8192;  // past the first records, inside the 16 KB of param/big
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string what;
  try {
    loom::AtomicFile file(path.string());
    loom::train::write_chunks(file, w.chunks(), torch::Tensor());
    file.commit();
  } catch (const loom::Error& e) {
    what = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &was);
  ::sigaction(SIGXFSZ, &before, nullptr);
  EXPECT_NE(what.find("cannot write '" + path.string() + "': File too large"), std::string::npos)
      << what;
  EXPECT_TRUE(fs::is_empty(dir.path));
}

// A file's chunks stay in it until asked for: what a reader gets is what the file holds then.
TEST(ChunkFile, ElementsAreReadFromTheFileWhenAsked) {
  TempDir dir;
  const torch::Tensor flat = torch::arange(16, torch::kFloat32), own = torch::ones({4});
  ChunkWriter w;
  put_state(w, flat, own);
  const FileSum sum = write(dir.path / "rank-00000.pt", w);
  loom::train::Manifest m;
  m.files = {{"rank-00000.pt", sum.bytes, sum.crc32, 0, {0}}};
  ChunkSet set;
  loom::train::read_checkpoint_file(dir.path.string(), m, 0, set);
  // After the index was read, b's elements [2, 10) (flat's [6, 14)) change in the file.
  std::string bytes = loom::read_file((dir.path / "rank-00000.pt").string());
  const torch::Tensor b = flat.slice(0, 6, 14).contiguous();
  const size_t at = bytes.find(std::string(static_cast<const char*>(b.data_ptr()), b.nbytes()));
  ASSERT_NE(at, std::string::npos);
  const torch::Tensor changed = torch::full({8}, -3.0f);
  bytes.replace(at, b.nbytes(), static_cast<const char*>(changed.data_ptr()), changed.nbytes());
  std::ofstream((dir.path / "rank-00000.pt").string(), std::ios::binary) << bytes;
  torch::Tensor out = torch::empty({3});
  ASSERT_TRUE(set.get("param/b", -1, 5, out));  // a part: elements [5, 8)
  EXPECT_TRUE(out.equal(torch::full({3}, -3.0f)));
  out = torch::empty({6}, torch::kFloat64);  // converted to the asker's dtype
  ASSERT_TRUE(set.get("param/a", -1, 0, out));
  EXPECT_TRUE(out.equal(flat.slice(0, 0, 6).to(torch::kFloat64)));
  torch::Tensor step = torch::empty({1}, torch::kInt64);
  ASSERT_TRUE(set.get("optimizer.step", -1, 0, step));
  EXPECT_EQ(step.item<int64_t>(), 7);
}

// A file is checked as it is read: its index (against the manifest) when it is opened, then
// each MiB block of elements a read touches (against the index); a read of a part reads
// little more than that part.
TEST(ChunkFile, WhatIsReadIsCheckedAndNothingElseIsRead) {
  TempDir dir;
  constexpr int64_t kBlock = int64_t{1} << 20, kFloats = kBlock / 4;
  const torch::Tensor big = torch::randn({int64_t{3} * kFloats - 5});  // 3 blocks, the last short
  const torch::Tensor small = torch::arange(10, torch::kFloat32);
  ChunkWriter w(/*borrow=*/true);
  w.put("param/big", -1, 0, {big.numel()}, big);
  w.put("param/small", -1, 0, {10}, small);
  const FileSum sum = write(dir.path / "rank-00000.pt", w);
  const std::string path = (dir.path / "rank-00000.pt").string();
  const std::string bytes = loom::read_file(path);
  // The file's CRC-32, joined from its blocks' while it was written, is its bytes'.
  EXPECT_EQ(sum.crc32, loom::train::crc32_of(bytes));
  loom::train::Manifest m;
  m.files = {{"rank-00000.pt", sum.bytes, sum.crc32, 0, {0}, sum.index_crc32}};
  auto open = [&](ChunkSet& set, loom::train::FileCheck check) {
    loom::train::read_checkpoint_file(dir.path.string(), m, 0, set, true, check);
  };
  auto what = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const loom::UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };

  ChunkSet set;
  int64_t before = loom::train::checkpoint_bytes_read();
  open(set, loom::train::FileCheck::kWhatIsRead);
  const int64_t index_bytes = loom::train::checkpoint_bytes_read() - before;
  EXPECT_LT(index_bytes, 64 << 10);  // the zip's directory and the index, not the elements
  // Parts: inside a block, across a block's end, the short last block, all of it.
  for (auto [at, n] : std::vector<std::pair<int64_t, int64_t>>{
           {3, 7}, {kFloats - 2, 5}, {2 * kFloats + 1, kFloats - 6}, {0, big.numel()}}) {
    torch::Tensor out = torch::empty({n});
    before = loom::train::checkpoint_bytes_read();
    ASSERT_TRUE(set.get("param/big", -1, at, out));
    EXPECT_TRUE(out.equal(big.slice(0, at, at + n))) << at;
    const int64_t blocks = (at + n - 1) / kFloats - at / kFloats + 1;
    EXPECT_LE(loom::train::checkpoint_bytes_read() - before, blocks * kBlock) << at;
  }

  // One byte of the big chunk's third block flipped: reads of the first block still pass, a
  // read that touches the third is refused naming the file, the bytes and the chunk.
  std::string damaged = bytes;
  const size_t at = bytes.find(std::string(static_cast<const char*>(big.data_ptr()), 64));
  ASSERT_NE(at, std::string::npos);
  damaged[at + 2 * kBlock + 100] ^= 0x10;
  std::ofstream(path, std::ios::binary) << damaged;
  ChunkSet after;
  open(after, loom::train::FileCheck::kWhatIsRead);
  torch::Tensor out = torch::empty({100});
  ASSERT_TRUE(after.get("param/big", -1, 0, out));
  EXPECT_TRUE(out.equal(big.slice(0, 0, 100)));
  const std::string refused = what([&] { after.get("param/big", -1, 2 * kFloats + 50, out); });
  EXPECT_NE(refused.find("rank-00000.pt' does not match its manifest (bytes 2097152 to 3145708 "
                         "of 'param/big': CRC-32 "),
            std::string::npos)
      << refused;
  // Checked whole (what `loom checkpoint info` asks), the same file is refused at once.
  ChunkSet whole;
  const std::string at_once = what([&] { open(whole, loom::train::FileCheck::kWholeFile); });
  EXPECT_NE(at_once.find("rank-00000.pt' does not match its manifest (CRC-32 "), std::string::npos)
      << at_once;

  // A damaged index (a chunk's shape) is refused when the file is opened.
  damaged = bytes;
  const std::string names = "param/big\nparam/small\n";
  const size_t meta = bytes.find(names);
  ASSERT_NE(meta, std::string::npos);
  damaged[meta + 3] ^= 0x01;  // a name changed: "parbm/big"
  std::ofstream(path, std::ios::binary) << damaged;
  ChunkSet none;
  const std::string index = what([&] { open(none, loom::train::FileCheck::kWhatIsRead); });
  EXPECT_NE(index.find("rank-00000.pt' does not match its manifest (the CRC-32 of its index is "),
            std::string::npos)
      << index;
}

// Files of format 1 (torch archives, written before 2026-12-07) still resume.
TEST(ChunkFile, ReadsFilesOfTheFormerFormat) {
  TempDir dir;
  const torch::Tensor a = torch::randn({2, 3}), step = torch::tensor({int64_t{5}});
  torch::serialize::OutputArchive ar;
  ar.write("c0", a.reshape({-1}));
  ar.write("c1", step);
  const std::string names = "param/a\noptimizer.step\n";
  ar.write("index_names", torch::tensor(std::vector<uint8_t>(names.begin(), names.end())));
  torch::Tensor meta = torch::zeros({2, 12}, torch::kInt64);  // replica, begin, numel, ndim, dims
  meta[0][0] = -1, meta[0][2] = 6, meta[0][3] = 2, meta[0][4] = 2, meta[0][5] = 3;
  meta[1][0] = -1, meta[1][2] = 1, meta[1][3] = 1, meta[1][4] = 1;
  ar.write("index_meta", meta);
  ar.write("rng", rng_state());
  const std::string path = (dir.path / "rank-00000.pt").string();
  ar.save_to(path);
  const std::string bytes = loom::read_file(path);
  loom::train::Manifest m;
  m.files = {
      {"rank-00000.pt", static_cast<int64_t>(bytes.size()), loom::train::crc32_of(bytes), 0, {0}}};
  ChunkSet set;
  EXPECT_TRUE(loom::train::read_checkpoint_file(dir.path.string(), m, 0, set).equal(rng_state()));
  torch::Tensor out = torch::empty({6});
  ASSERT_TRUE(set.get("param/a", -1, 0, out));
  EXPECT_TRUE(out.equal(a.reshape({-1})));
  EXPECT_EQ(*set.shape("param/a", -1), (std::vector<int64_t>{2, 3}));
  torch::Tensor got = torch::empty({1}, torch::kInt64);
  ASSERT_TRUE(set.get("optimizer.step", -1, 0, got));
  EXPECT_EQ(got.item<int64_t>(), 5);
}

// A file that is not a loom checkpoint file (though it matches its manifest) is one line
// naming it and why: not a zip, a format this loom does not know, a damaged index.
TEST(ChunkFile, FilesOfNoKnownFormatAreNamed) {
  TempDir dir;
  auto refusal = [&](const std::string& bytes) {
    const std::string path = (dir.path / "rank-00000.pt").string();
    std::ofstream(path, std::ios::binary) << bytes;
    loom::train::Manifest m;
    m.files = {{"rank-00000.pt",
                static_cast<int64_t>(bytes.size()),
                loom::train::crc32_of(bytes),
                0,
                {0}}};
    ChunkSet set;
    try {
      loom::train::read_checkpoint_file(dir.path.string(), m, 0, set);
    } catch (const loom::UsageError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto zip = [](const std::string& format, const std::string& meta) {
    std::string bytes;
    caffe2::serialize::PyTorchStreamWriter w([&](const void* p, size_t n) {
      bytes.append(static_cast<const char*>(p), n);
      return n;
    });
    w.writeRecord("loom_chunks", format.data(), format.size());
    w.writeRecord("index_names", "param/a\n", 8);
    w.writeRecord("index_meta", meta.data(), meta.size());
    w.writeEndOfFile();
    return bytes;
  };
  EXPECT_NE(refusal("not a zip at all").find("rank-00000.pt' is not a loom checkpoint file"),
            std::string::npos);
  EXPECT_NE(refusal(zip("3", "")).find("is of format 3, this loom reads 2 and 1"),
            std::string::npos);
  const std::string bad_index = refusal(zip("2", std::string(12, '\0')));
  EXPECT_NE(bad_index.find("is not a loom checkpoint file of this format (bad index)"),
            std::string::npos)
      << bad_index;
  // An index row whose chunk record is missing.
  std::vector<int64_t> row(13, 0);
  row[0] = -1, row[2] = 4, row[3] = static_cast<int64_t>(torch::kFloat32), row[4] = 1, row[5] = 4;
  const std::string missing =
      refusal(zip("2", std::string(reinterpret_cast<const char*>(row.data()), 13 * 8)));
  EXPECT_NE(missing.find("is not a loom checkpoint file of this format ("), std::string::npos)
      << missing;
  // A chunk reaching past its tensor's end (5 elements of a tensor of 4).
  row[2] = 5;
  const std::string past =
      refusal(zip("2", std::string(reinterpret_cast<const char*>(row.data()), 13 * 8)));
  EXPECT_NE(past.find("(bad index)"), std::string::npos) << past;
}

TEST(WholeTensors, AssemblesPiecesAsTheyArriveAndKeepsOnlyWhatIsAsked) {
  loom::parallel::WholeTensors wholes(
      [](const std::string& name) { return name.rfind("param/", 0) == 0; });
  const torch::Tensor b = torch::arange(10, torch::kFloat32);
  // A ZeRO shard's pieces from two files, out of order, one piece arriving twice.
  wholes.add({"param/b", -1, 6, {2, 5}, b.slice(0, 6, 10).clone()});
  wholes.add({"adamw.exp_avg/b", -1, 0, {2, 5}, torch::zeros({10})});
  wholes.add({"param/b", -1, 0, {2, 5}, b.slice(0, 0, 6).clone()});
  wholes.add({"param/b", -1, 4, {2, 5}, b.slice(0, 4, 8).clone()});
  wholes.add({"param/c", 1, 0, {3}, torch::ones({3})});
  const auto got = wholes.take();
  ASSERT_EQ(got.size(), 2u);  // the optimizer's state not kept
  const auto& whole = got.at({"param/b", -1});
  EXPECT_EQ(whole.begin, 0);
  EXPECT_EQ(whole.shape, (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(whole.data.equal(b));
  EXPECT_TRUE(got.at({"param/c", 1}).data.equal(torch::ones({3})));
}

TEST(WholeTensors, SaysWhichElementsNoFileHeld) {
  loom::parallel::WholeTensors wholes;
  wholes.add({"param/b", 0, 0, {10}, torch::zeros({3})});
  wholes.add({"param/b", 0, 7, {10}, torch::zeros({3})});
  try {
    wholes.take();
    ADD_FAILURE() << "a tensor with a gap was taken";
  } catch (const loom::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("lacks elements [3, 7) of 'param/b' (replica 0)"),
              std::string::npos)
        << e.what();
  }
  loom::parallel::WholeTensors tail;
  tail.add({"param/b", -1, 0, {10}, torch::zeros({8})});
  EXPECT_THROW(tail.take(), loom::UsageError);  // [8, 10) missing at the end
  loom::parallel::WholeTensors shapes;
  shapes.add({"param/b", -1, 0, {10}, torch::zeros({5})});
  EXPECT_THROW(shapes.add({"param/b", -1, 5, {2, 5}, torch::zeros({5})}), loom::UsageError);
  EXPECT_THROW(shapes.add({"param/b", -1, 8, {10}, torch::zeros({5})}), loom::UsageError);
}

TEST(ChunkName, SplitsKeyParameterAndTensorParallelPart) {
  using loom::parallel::parse_chunk_name;
  const auto split = parse_chunk_name("adamw.exp_avg/blocks.3.qkv.weight#tp1of2");
  EXPECT_EQ(split.key, "adamw.exp_avg");
  EXPECT_EQ(split.param, "blocks.3.qkv.weight");
  EXPECT_EQ(split.part, 1);
  EXPECT_EQ(split.parts, 2);
  const auto whole = parse_chunk_name("param/ln_f.weight");
  EXPECT_EQ(whole.param, "ln_f.weight");
  EXPECT_EQ(whole.part, -1);
  const auto counter = parse_chunk_name("optimizer.step");
  EXPECT_EQ(counter.key, "optimizer.step");
  EXPECT_TRUE(counter.param.empty());
}

// A resume under another layout keeps of each file only what its stages ask for.
TEST(ChunkFilter, KeepsTheWantedElementsOfShardsAndTheStagesOtherTensorsWhole) {
  ChunkSet set;
  loom::parallel::ChunkFilter f(set);
  f.want_range("param/a", 7, 9);
  f.want_range("param/a", 2, 5);
  f.want_range("param/a", 4, 6);  // overlaps [2, 5): [2, 6)
  f.want_param("a");
  const torch::Tensor a = torch::arange(10, torch::kFloat32);
  f.add({"param/a", -1, 0, {10}, a.clone()});  // a file with all of a: [2, 6) and [7, 9) kept
  ASSERT_EQ(set.size(), 2u);
  torch::Tensor got = torch::empty({4});
  ASSERT_TRUE(set.get("param/a", -1, 2, got));
  EXPECT_TRUE(got.equal(a.slice(0, 2, 6)));
  EXPECT_FALSE(set.covers("param/a", -1, 6, 1));
  EXPECT_TRUE(set.covers("param/a", -1, 7, 2));
  EXPECT_FALSE(set.covers("param/a", -1, 0, 1));
  // A chunk wholly wanted passes as it is.
  const torch::Tensor inside = a.slice(0, 7, 9).clone();
  f.add({"param/a", 0, 7, {10}, inside});
  EXPECT_EQ(set.size(), 3u);
  // Another parameter under a key with ranges: not this rank's shard; under any other key the
  // stage's parameters whole (any tensor-parallel part), other parameters not; plain names kept.
  f.add({"param/b", -1, 0, {10}, a.clone()});
  f.add({"quant.residual/a#tp1of2", 0, 0, {10}, a.clone()});
  f.add({"quant.residual/b", 0, 0, {10}, a.clone()});
  f.add({"optimizer.step", -1, 0, {1}, torch::ones({1}, torch::kInt64)});
  EXPECT_EQ(set.size(), 5u);
  EXPECT_FALSE(set.has("param/b", -1));
  EXPECT_TRUE(set.covers("quant.residual/a#tp1of2", 0, 0, 10));
  EXPECT_FALSE(set.has("quant.residual/b", 0));
  EXPECT_TRUE(set.has("optimizer.step", -1));
}

// The piece a filter keeps does not share the file's memory.
TEST(ChunkFilter, KeptPiecesAreCopiesOfExactlyTheirElements) {
  struct Keep : loom::parallel::ChunkSink {
    std::vector<loom::parallel::Chunk> got;
    void add(loom::parallel::Chunk c) override { got.push_back(std::move(c)); }
  } keep;
  loom::parallel::ChunkFilter f(keep);
  f.want_range("param/a", 2, 5);
  f.want_range("param/a", 7, 9);
  const torch::Tensor file = torch::arange(10, torch::kFloat32);
  f.add({"param/a", -1, 4, {10}, file.slice(0, 4, 10).clone()});
  ASSERT_EQ(keep.got.size(), 2u);
  EXPECT_EQ(keep.got[0].begin, 4);
  EXPECT_EQ(keep.got[0].data.storage().nbytes(), 4u);
  EXPECT_TRUE(keep.got[0].data.equal(file.slice(0, 4, 5)));
  EXPECT_EQ(keep.got[1].begin, 7);
  EXPECT_EQ(keep.got[1].data.storage().nbytes(), 8u);
  EXPECT_TRUE(keep.got[1].data.equal(file.slice(0, 7, 9)));
  EXPECT_EQ(keep.got[1].shape, (std::vector<int64_t>{10}));
}

}  // namespace

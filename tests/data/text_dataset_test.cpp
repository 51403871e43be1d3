#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "../support/usage_message.h"
#include "loom/common/error.h"
#include "loom/data/dataset.h"
#include "temp_dir.h"

namespace loom::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

std::vector<int64_t> all_indices(const Dataset& ds) {
  std::vector<int64_t> idx(ds.size());
  std::iota(idx.begin(), idx.end(), 0);
  return idx;
}

// The text the dataset yields, rebuilt from its windows (each window's first seq_len bytes,
// then the final target byte).
std::string windows_text(const Dataset& ds) {
  Batch b = ds.get(all_indices(ds));
  std::string s(b.input.i64.begin(), b.input.i64.end());
  s.push_back(static_cast<char>(b.target.i64.back()));
  return s;
}

using loom::test::usage_message;

TEST(TextDataset, FileWindowsAreShiftedByOne) {
  TempDir dir;
  const std::string path = dir / "a.txt";
  const std::string text = "hello, world! this is loom.\n";  // 28 bytes
  write_file(path, text);
  auto ds = open_text(path, 4, Split::Train, 0.0);
  ASSERT_EQ(ds->size(), (28 - 1) / 4);
  const std::vector<int64_t> idx = {0, 5, 2};
  Batch b = ds->get(idx);
  EXPECT_EQ(b.input.type, ElemType::Int64);
  EXPECT_EQ(b.target.type, ElemType::Int64);
  EXPECT_EQ(b.input.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(b.target.shape, (std::vector<int64_t>{3, 4}));
  for (size_t k = 0; k < idx.size(); ++k) {
    for (int64_t t = 0; t < 4; ++t) {
      const auto at = static_cast<size_t>(idx[k] * 4 + t);
      EXPECT_EQ(b.input.i64[k * 4 + t], static_cast<uint8_t>(text[at]));
      EXPECT_EQ(b.target.i64[k * 4 + t], static_cast<uint8_t>(text[at + 1]));
    }
  }
  EXPECT_EQ(windows_text(*ds), text.substr(0, 6 * 4 + 1));
}

TEST(TextDataset, BytesAbove127AreNonNegative) {
  TempDir dir;
  write_file(dir / "u8.txt", "\xc3\xa9\xff\x80\x01");
  Batch b = open_text(dir / "u8.txt", 4, Split::Train, 0.0)->get(std::vector<int64_t>{0});
  EXPECT_EQ(b.input.i64, (std::vector<int64_t>{0xc3, 0xa9, 0xff, 0x80}));
  EXPECT_EQ(b.target.i64, (std::vector<int64_t>{0xa9, 0xff, 0x80, 0x01}));
}

TEST(TextDataset, SplitSizes) {
  TempDir dir;
  const std::string path = dir / "a.txt";
  std::string text(1000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  write_file(path, text);
  // 10% of 1000 bytes: train = first 900 bytes, test = last 100.
  auto train = open_text(path, 8, Split::Train, 0.1);
  auto test = open_text(path, 8, Split::Test, 0.1);
  EXPECT_EQ(train->size(), (900 - 1) / 8);
  EXPECT_EQ(test->size(), (100 - 1) / 8);
  EXPECT_EQ(windows_text(*train), text.substr(0, train->size() * 8 + 1));
  EXPECT_EQ(windows_text(*test), text.substr(900, test->size() * 8 + 1));
  // Default fraction 0.05.
  EXPECT_EQ(open_text(path, 8, Split::Test)->size(), (50 - 1) / 8);
  EXPECT_EQ(open_text(path, 8, Split::Train)->size(), (950 - 1) / 8);
}

TEST(TextDataset, FolderSortedSkipsDatAndDuplicates) {
  TempDir dir;
  write_file(dir / "b", "BBBB");
  write_file(dir / "b.dat", "index-data-that-must-be-skipped");
  write_file(dir / "a", "AAAA");
  write_file(dir / "sub/c", "CCCC");
  fs::create_symlink("b", dir.path() / "b.u8");        // same file again: read once
  fs::create_symlink("b.dat", dir.path() / "z.link");  // a link to an index file: skipped
  fs::create_symlink("missing", dir.path() / "broken");
  fs::create_directories(dir.path() / "empty");
  fs::create_directory_symlink(dir.path(), dir.path() / "sub/loop");  // a cycle
  auto ds = open_text(dir.path().string(), 3, Split::Train, 0.0);
  // 12 bytes give (12 - 1) / 3 = 3 windows covering the first 10 bytes.
  EXPECT_EQ(ds->size(), 3);
  EXPECT_EQ(windows_text(*ds), "AAAABBBBCC");
  EXPECT_EQ(windows_text(*open_text(dir.path().string(), 1, Split::Train, 0.0)), "AAAABBBBCCCC");
  EXPECT_NE(ds->describe().find("3 files"), std::string::npos) << ds->describe();
}

TEST(TextDataset, LinkNamedFirstWinsButContentReadOnce) {
  TempDir dir;
  write_file(dir / "z/real", "RRRR");
  fs::create_directories(dir.path() / "a");
  fs::create_symlink(dir.path() / "z/real", dir.path() / "a/link");
  auto ds = open_text(dir.path().string(), 3, Split::Train, 0.0);
  EXPECT_EQ(windows_text(*ds), "RRRR");
}

TEST(TextDataset, TooShort) {
  TempDir dir;
  write_file(dir / "short.txt", "abcd");
  EXPECT_EQ(open_text(dir / "short.txt", 3, Split::Train, 0.0)->size(), 1);
  const std::string msg =
      usage_message([&] { open_text(dir / "short.txt", 4, Split::Train, 0.0); });
  EXPECT_NE(msg.find(dir / "short.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // The test split of a small file is smaller still.
  EXPECT_NE(usage_message([&] { open_text(dir / "short.txt", 1, Split::Test, 0.25); }), "");
  write_file(dir / "empty.txt", "");
  EXPECT_NE(usage_message([&] { open_text(dir / "empty.txt", 1, Split::Train); }), "");
}

TEST(TextDataset, MissingOrEmpty) {
  TempDir dir;
  const std::string missing = dir / "nope";
  const std::string msg = usage_message([&] { open_text(missing, 8, Split::Train); });
  EXPECT_NE(msg.find(missing + " not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data.path"), std::string::npos) << msg;
  fs::create_directories(dir.path() / "only_dat");
  write_file(dir / "only_dat/x.dat", "0123456789");
  EXPECT_NE(
      usage_message([&] { open_text(dir / "only_dat", 2, Split::Train); }).find("no text files"),
      std::string::npos);
}

TEST(TextDataset, BadArguments) {
  TempDir dir;
  write_file(dir / "a.txt", "abcdefgh");
  EXPECT_THROW(open_text(dir / "a.txt", 0, Split::Train), UsageError);
  EXPECT_THROW(open_text(dir / "a.txt", 2, Split::Train, 1.0), UsageError);
  EXPECT_THROW(open_text(dir / "a.txt", 2, Split::Train, -0.1), UsageError);
}

TEST(TextDataset, RealFortunes) {
  const std::string dir = "/usr/share/games/fortunes";
  if (!fs::exists(dir + "/cookie")) GTEST_SKIP() << dir << " is absent";
  // Expected: every regular non-.dat file once (the *.u8 links point at files already read).
  uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool dat = name.size() >= 4 && name.substr(name.size() - 4) == ".dat";
    if (!e.is_symlink() && e.is_regular_file() && !dat) bytes += e.file_size();
  }
  auto ds = open_text(dir, 256, Split::Train, 0.0);
  EXPECT_EQ(ds->size(), static_cast<int64_t>((bytes - 1) / 256));
}

}  // namespace
}  // namespace loom::data

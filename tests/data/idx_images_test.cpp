#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <numeric>

#include "loom/common/error.h"
#include "loom/data/dataset.h"
#include "temp_dir.h"

namespace loom::data {
namespace {

using testing::TempDir;
using testing::write_file;

const char* kRealDir = "/usr/share/datasets/fashion-mnist";

std::string be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

uint8_t pixel(int64_t image, int64_t p) {
  return static_cast<uint8_t>((image * 7 + p * 3) % 256);
}

std::string idx_images(uint32_t n, uint32_t rows = 28, uint32_t cols = 28,
                       uint32_t magic = 0x00000803) {
  std::string s = be32(magic) + be32(n) + be32(rows) + be32(cols);
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t p = 0; p < rows * cols; ++p) s.push_back(static_cast<char>(pixel(i, p)));
  }
  return s;
}

std::string idx_labels(uint32_t n, uint32_t magic = 0x00000801) {
  std::string s = be32(magic) + be32(n);
  for (uint32_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

// Runs `fn`, expects a one-line UsageError that contains every one of `parts`.
void expect_usage_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no UsageError thrown";
  } catch (const UsageError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const std::string& part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

// Malformed-file tests run on gzipped files ("x.gz") and on plain unpacked files ("x").
class IdxFiles : public ::testing::TestWithParam<bool> {
 protected:
  bool gz() const { return GetParam(); }
  std::string name(const std::string& stem) const { return dir_ / (stem + (gz() ? ".gz" : "")); }
  std::string images(const char* split = "train") const {
    return name(std::string(split) + "-images-idx3-ubyte");
  }
  std::string labels(const char* split = "train") const {
    return name(std::string(split) + "-labels-idx1-ubyte");
  }
  void write(const std::string& path, const std::string& bytes) const {
    if (gz()) {
      write_gz(path, bytes);
    } else {
      write_file(path, bytes);
    }
  }
  void write_set(uint32_t n_images, uint32_t n_labels, const char* split = "train") const {
    write(images(split), idx_images(n_images));
    write(labels(split), idx_labels(n_labels));
  }
  std::string dir() const { return dir_.path().string(); }

  TempDir dir_;
};

INSTANTIATE_TEST_SUITE_P(GzipAndPlain, IdxFiles, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "gzip" : "plain"; });

TEST_P(IdxFiles, ValidSetLoads) {
  write_set(5, 5);
  auto ds = open_idx_images(dir(), Split::Train);
  ASSERT_EQ(ds->size(), 5);
  EXPECT_EQ(ds->describe(), "fashion-mnist train: 5 images 28x28");
  const std::vector<int64_t> idx = {4, 0, 4};
  Batch b = ds->get(idx);
  EXPECT_EQ(b.input.type, ElemType::Float32);
  EXPECT_EQ(b.input.shape, (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(b.input.numel(), 3 * 784);
  ASSERT_EQ(b.input.f32.size(), 3u * 784);
  EXPECT_EQ(b.target.type, ElemType::Int64);
  EXPECT_EQ(b.target.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(b.target.i64, (std::vector<int64_t>{4, 0, 4}));
  for (int64_t k = 0; k < 3; ++k) {
    for (int64_t p = 0; p < 784; ++p) {
      ASSERT_FLOAT_EQ(b.input.f32[k * 784 + p], pixel(idx[k], p) / 255.0f) << k << " " << p;
    }
  }
}

TEST_P(IdxFiles, TestSplitReadsT10kFiles) {
  write_set(3, 3, "t10k");
  auto ds = open_idx_images(dir(), Split::Test);
  EXPECT_EQ(ds->size(), 3);
  EXPECT_EQ(ds->describe(), "fashion-mnist test: 3 images 28x28");
  // The train files are not there.
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {dir_ / "train-images-idx3-ubyte.gz", "not found"});
}

TEST_P(IdxFiles, BadMagicImages) {
  write(images(), idx_images(5, 28, 28, 0x00000804));
  write(labels(), idx_labels(5));
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {images(), "bad magic 0x00000804", "0x00000803", "reinstall"});
}

TEST_P(IdxFiles, BadMagicLabels) {
  write(images(), idx_images(5));
  write(labels(), idx_labels(5, 0x00000803));
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {labels(), "bad magic", "0x00000801"});
}

TEST_P(IdxFiles, TruncatedImages) {
  std::string bytes = idx_images(5);
  bytes.resize(16 + 3 * 784 + 10);
  write(images(), bytes);
  write(labels(), idx_labels(5));
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {images(), "is truncated (expected 3936 bytes, got 2378)",
                      "apt-get install --reinstall dataset-fashion-mnist"});
}

TEST_P(IdxFiles, TruncatedHeader) {
  write(images(), idx_images(5).substr(0, 10));
  write(labels(), idx_labels(5));
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {images(), "truncated", "header"});
}

TEST_P(IdxFiles, TruncatedLabels) {
  write(images(), idx_images(5));
  write(labels(), idx_labels(5).substr(0, 10));
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); }, {labels(), "truncated"});
}

TEST_P(IdxFiles, TooLong) {
  write(images(), idx_images(5) + "extra");
  write(labels(), idx_labels(5));
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); }, {images(), "longer"});
}

TEST_P(IdxFiles, CountMismatch) {
  write_set(5, 4);
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {images(), labels(), "5 images", "4 labels"});
}

TEST_P(IdxFiles, LabelOutOfRange) {
  write(images(), idx_images(5));
  std::string l = idx_labels(5);
  l[8 + 3] = 10;
  write(labels(), l);
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {labels(), "label 10 at index 3"});
}

TEST_P(IdxFiles, EmptyFile) {
  write(images(), "");
  write(labels(), idx_labels(5));
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); }, {images(), "is empty"});
}

TEST_P(IdxFiles, MissingLabels) {
  write(images(), idx_images(5));
  // Either name would do; the message names the .gz one, which is what the package installs.
  expect_usage_error([&] { open_idx_images(dir(), Split::Train); },
                     {dir_ / "train-labels-idx1-ubyte.gz", "not found",
                      "apt-get install dataset-fashion-mnist", "data.path"});
}

TEST(IdxImages, MissingDir) {
  const std::string dir = "/nonexistent/loom/fashion-mnist";
  expect_usage_error([&] { open_idx_images(dir, Split::Train); },
                     {dir + "/train-images-idx3-ubyte.gz not found",
                      "install it with 'apt-get install dataset-fashion-mnist' or set data.path"});
}

TEST(IdxImages, PlainBytesUnderGzName) {
  TempDir dir;
  write_file(dir / "train-images-idx3-ubyte.gz", idx_images(2));
  write_file(dir / "train-labels-idx1-ubyte.gz", idx_labels(2));
  EXPECT_EQ(open_idx_images(dir.path().string(), Split::Train)->size(), 2);
}

TEST(IdxImages, CutGzipStream) {
  TempDir dir;
  const std::string images = dir / "train-images-idx3-ubyte.gz";
  write_gz(images, idx_images(50));
  write_gz(dir / "train-labels-idx1-ubyte.gz", idx_labels(50));
  std::filesystem::resize_file(images, std::filesystem::file_size(images) / 2);
  expect_usage_error([&] { open_idx_images(dir.path().string(), Split::Train); },
                     {images, "truncated"});
}

TEST(IdxImages, RealFashionMnist) {
  if (!std::filesystem::exists(kRealDir)) {
    GTEST_SKIP() << kRealDir << " is absent (apt-get install dataset-fashion-mnist)";
  }
  struct Case {
    Split split;
    int64_t n;
    std::vector<int64_t> first_labels;
  };
  const std::vector<Case> cases = {{Split::Train, 60000, {9, 0, 0, 3, 0, 2, 7, 2, 5, 5}},
                                   {Split::Test, 10000, {9, 2, 1, 1, 6, 1, 4, 6, 5, 7}}};
  for (const Case& c : cases) {
    auto ds = open_idx_images(kRealDir, c.split);
    ASSERT_EQ(ds->size(), c.n);
    EXPECT_NE(ds->describe().find(std::to_string(c.n) + " images 28x28"), std::string::npos);
    std::vector<int64_t> histogram(10, 0);
    float lo = 1, hi = 0;
    std::vector<int64_t> labels;
    constexpr int64_t kChunk = 5000;
    for (int64_t first = 0; first < c.n; first += kChunk) {
      std::vector<int64_t> idx(std::min(kChunk, c.n - first));
      std::iota(idx.begin(), idx.end(), first);
      Batch b = ds->get(idx);
      ASSERT_EQ(b.input.shape, (std::vector<int64_t>{int64_t(idx.size()), 1, 28, 28}));
      const auto [mn, mx] = std::minmax_element(b.input.f32.begin(), b.input.f32.end());
      lo = std::min(lo, *mn);
      hi = std::max(hi, *mx);
      for (int64_t l : b.target.i64) {
        ASSERT_GE(l, 0);
        ASSERT_LT(l, 10);
        ++histogram[l];
      }
      if (first == 0) labels.assign(b.target.i64.begin(), b.target.i64.begin() + 10);
    }
    EXPECT_EQ(lo, 0.0f);
    EXPECT_EQ(hi, 1.0f);
    EXPECT_EQ(histogram, std::vector<int64_t>(10, c.n / 10));  // Fashion-MNIST is balanced
    EXPECT_EQ(labels, c.first_labels);
  }
}

}  // namespace
}  // namespace loom::data

// Fashion-MNIST / MNIST from IDX files. zlib's gzread also reads plain (unpacked) files, so one
// reader serves both. Whole files are loaded at open; pixels stay uint8 until get().
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <memory>
#include <sstream>

#include "loom/common/error.h"
#include "loom/data/dataset.h"

namespace loom::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kName = "fashion-mnist";
constexpr const char* kInstall =
    "install it with 'apt-get install dataset-fashion-mnist' or set data.path";
constexpr const char* kReinstall =
    "reinstall with 'apt-get install --reinstall dataset-fashion-mnist'";
constexpr uint32_t kImageMagic = 0x00000803;  // unsigned byte, 3 dims
constexpr uint32_t kLabelMagic = 0x00000801;  // unsigned byte, 1 dim
constexpr int64_t kClasses = 10;
constexpr int64_t kMaxSide = 4096;  // sanity bound on rows/cols, keeps sizes far from overflow

[[noreturn]] void bad_file(const std::string& path, const std::string& problem) {
  LOOM_USAGE(kName, ": ", path, " ", problem, "; ", kReinstall);
}

// `dir`/`stem`.gz, or the unpacked `dir`/`stem` when only that exists.
std::string find_file(const fs::path& dir, const std::string& stem) {
  const fs::path gz = dir / (stem + ".gz");
  const fs::path plain = dir / stem;
  std::error_code ec;
  for (const fs::path& p : {gz, plain}) {
    if (!fs::exists(p, ec)) continue;
    if (!fs::is_regular_file(p, ec)) bad_file(p.string(), "is not a regular file");
    return p.string();
  }
  LOOM_USAGE(kName, ": ", gz.string(), " not found; ", kInstall);
}

std::vector<uint8_t> read_all(const std::string& path) {
  errno = 0;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) {
    bad_file(path, std::string("cannot be opened (") +
                       (errno ? std::strerror(errno) : "out of memory") + ")");
  }
  gzbuffer(file.get(), 1 << 18);
  constexpr size_t kChunk = 1 << 22;
  std::vector<uint8_t> bytes;
  for (;;) {
    const size_t have = bytes.size();
    bytes.resize(have + kChunk);
    const int got = gzread(file.get(), bytes.data() + have, static_cast<unsigned>(kChunk));
    bytes.resize(have + (got > 0 ? got : 0));
    if (got <= 0) break;
  }
  int err = Z_OK;
  const char* msg = gzerror(file.get(), &err);
  if (err == Z_BUF_ERROR) bad_file(path, "is truncated (the gzip stream ends early)");
  if (err != Z_OK) bad_file(path, std::string("is corrupt (zlib: ") + msg + ")");
  bytes.shrink_to_fit();
  return bytes;
}

uint32_t big_endian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

std::string hex32(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return os.str();
}

struct IdxFile {
  std::string path;
  std::vector<uint8_t> bytes;  // the whole decompressed file, header included
  std::vector<int64_t> dims;
  size_t offset = 0;  // where the data starts
};

IdxFile read_idx(const std::string& path, uint32_t magic, size_t ndims, const char* kind) {
  IdxFile f{path, read_all(path), {}, 4 + 4 * ndims};
  const size_t size = f.bytes.size();
  if (size == 0) bad_file(path, "is empty");
  if (size < 4) {
    bad_file(path, "is truncated (the IDX header needs " + std::to_string(f.offset) +
                       " bytes, got " + std::to_string(size) + ")");
  }
  const uint32_t got_magic = big_endian32(f.bytes.data());
  if (got_magic != magic) {
    bad_file(path, "has bad magic " + hex32(got_magic) + " (expected " + hex32(magic) +
                       " for an IDX " + kind + " file)");
  }
  if (size < f.offset) {
    bad_file(path, "is truncated (the IDX header needs " + std::to_string(f.offset) +
                       " bytes, got " + std::to_string(size) + ")");
  }
  uint64_t expected = f.offset;
  uint64_t count = 1;
  for (size_t d = 0; d < ndims; ++d) {
    const uint32_t dim = big_endian32(f.bytes.data() + 4 + 4 * d);
    if (dim == 0 || (d > 0 && dim > kMaxSide)) {
      bad_file(path, "has invalid dimension " + std::to_string(d) + " = " + std::to_string(dim));
    }
    f.dims.push_back(dim);
    count *= dim;
  }
  expected += count;
  if (size < expected) {
    bad_file(path, "is truncated (expected " + std::to_string(expected) + " bytes, got " +
                       std::to_string(size) + ")");
  }
  if (size > expected) {
    bad_file(path, "is longer than its header says (expected " + std::to_string(expected) +
                       " bytes, got " + std::to_string(size) + ")");
  }
  return f;
}

class IdxImages : public Dataset {
 public:
  IdxImages(IdxFile images, IdxFile labels, std::string split)
      : images_(std::move(images.bytes)),
        images_offset_(images.offset),
        labels_(std::move(labels.bytes)),
        labels_offset_(labels.offset),
        n_(images.dims[0]),
        rows_(images.dims[1]),
        cols_(images.dims[2]),
        split_(std::move(split)) {
    for (int i = 0; i < 256; ++i) scale_[i] = static_cast<float>(i) / 255.0f;  // 255 -> 1 exactly
  }

  int64_t size() const override { return n_; }

  Batch get(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    const int64_t pixels = rows_ * cols_;
    Batch b;
    b.input.type = ElemType::Float32;
    b.input.shape = {n, 1, rows_, cols_};
    b.input.f32.resize(n * pixels);
    b.target.type = ElemType::Int64;
    b.target.shape = {n};
    b.target.i64.resize(n);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t i = indices[k];
      LOOM_CHECK(i >= 0 && i < n_, "sample index ", i, " outside [0, ", n_, ")");
      const uint8_t* src = images_.data() + images_offset_ + i * pixels;
      float* dst = b.input.f32.data() + k * pixels;
      for (int64_t p = 0; p < pixels; ++p) dst[p] = scale_[src[p]];
      b.target.i64[k] = labels_[labels_offset_ + i];
    }
    return b;
  }

  std::string describe() const override {
    return std::string(kName) + " " + split_ + ": " + std::to_string(n_) + " images " +
           std::to_string(rows_) + "x" + std::to_string(cols_);
  }

 private:
  std::vector<uint8_t> images_;
  size_t images_offset_;
  std::vector<uint8_t> labels_;
  size_t labels_offset_;
  int64_t n_, rows_, cols_;
  std::string split_;
  std::array<float, 256> scale_;
};

}  // namespace

std::unique_ptr<Dataset> open_idx_images(const std::string& dir, Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  IdxFile images = read_idx(images_path, kImageMagic, 3, "image");
  IdxFile labels = read_idx(labels_path, kLabelMagic, 1, "label");
  if (images.dims[0] != labels.dims[0]) {
    LOOM_USAGE(kName, ": ", images_path, " has ", images.dims[0], " images but ", labels_path,
               " has ", labels.dims[0], " labels; ", kReinstall);
  }
  for (size_t i = labels.offset; i < labels.bytes.size(); ++i) {
    if (labels.bytes[i] >= kClasses) {
      bad_file(labels_path, "has label " + std::to_string(labels.bytes[i]) + " at index " +
                                std::to_string(i - labels.offset) + " (expected 0.." +
                                std::to_string(kClasses - 1) + ")");
    }
  }
  return std::make_unique<IdxImages>(std::move(images), std::move(labels),
                                     split == Split::Train ? "train" : "test");
}

}  // namespace loom::data

#include "loom/train/chunk_file.h"

#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "loom/common/error.h"
#include "loom/common/files.h"

namespace loom::train {
namespace {

// The file is a zip of uncompressed records, each 64-byte aligned (torch's PyTorchStreamWriter):
//   loom_chunks  the format, "2"
//   index_names  the chunks' names, one a line
//   index_meta   int64 a chunk, kMetaCols each: replica, begin, numel, dtype (c10::ScalarType),
//                ndim, dims (at most kMaxDims)
//   chunk/<i>    chunk i's elements
//   rng          the writer's RNG state (bytes), when it has one
// Numbers are little-endian. Format 1 (before 2026-12-07) was a torch archive of tensors
// ("c<i>", "index_names", "index_meta" without the dtype column, "rng"); it is still read.
static_assert(std::endian::native == std::endian::little,
              "loom's checkpoint files are little-endian");
constexpr const char* kFormatRecord = "loom_chunks";
constexpr const char* kFormat = "2";
constexpr int64_t kMaxDims = 8, kMetaCols = 5 + kMaxDims, kLegacyMetaCols = 4 + kMaxDims;

std::string record_of(size_t i) {
  std::string key = "chunk/";  // not "chunk/" + to_string(i): GCC 12 warns falsely on that
  return key += std::to_string(i);
}

}  // namespace

FileSum write_chunks(AtomicFile& file, const std::vector<parallel::Chunk>& chunks,
                     const torch::Tensor& rng, std::string* keep) {
  std::string names;
  std::vector<int64_t> meta(chunks.size() * kMetaCols, 0);
  for (size_t i = 0; i < chunks.size(); ++i) {
    const parallel::Chunk& c = chunks[i];
    LOOM_CHECK(c.name.find('\n') == std::string::npos && c.shape.size() <= kMaxDims,
               "chunk name or shape not storable: ", c.name);
    LOOM_CHECK(c.data.is_cpu() && c.data.is_contiguous(), "chunk '", c.name, "' not in memory");
    names += c.name + "\n";
    int64_t* row = &meta[i * kMetaCols];
    row[0] = c.replica;
    row[1] = c.begin;
    row[2] = c.data.numel();
    row[3] = static_cast<int64_t>(c.data.scalar_type());
    row[4] = static_cast<int64_t>(c.shape.size());
    for (size_t d = 0; d < c.shape.size(); ++d) row[5 + d] = c.shape[d];
  }
  if (keep) {  // sized once for the file (its records, their headers and padding)
    size_t size = 1 << 20;
    for (const auto& c : chunks) size += c.data.nbytes() + 512;
    keep->reserve(size);
  }
  // The records go onto the file as they come (a chunk's elements straight from its tensor).
  // The writer calls this from C code: a failure is kept and thrown after it returns.
  FileSum sum;
  std::exception_ptr failure;
  caffe2::serialize::PyTorchStreamWriter zip([&](const void* data, size_t n) {
    if (failure) return n;
    const std::string_view piece(static_cast<const char*>(data), n);
    try {
      file.write(piece);
      if (keep) keep->append(piece);
    } catch (...) {
      failure = std::current_exception();
      return n;
    }
    sum.crc32 = crc32_of(piece, sum.crc32);
    sum.bytes += static_cast<int64_t>(n);
    return n;
  });
  zip.writeRecord(kFormatRecord, kFormat, std::strlen(kFormat));
  zip.writeRecord("index_names", names.data(), names.size());
  zip.writeRecord("index_meta", meta.data(), meta.size() * sizeof(int64_t));
  for (size_t i = 0; i < chunks.size(); ++i)
    zip.writeRecord(record_of(i), chunks[i].data.data_ptr(), chunks[i].data.nbytes());
  if (rng.defined()) {
    const torch::Tensor bytes = rng.to(torch::kCPU).contiguous();
    LOOM_CHECK(bytes.scalar_type() == torch::kUInt8, "an RNG state is bytes");
    zip.writeRecord("rng", bytes.data_ptr(), bytes.nbytes());
  }
  zip.writeEndOfFile();
  if (failure) std::rethrow_exception(failure);
  return sum;
}

std::string exception_line(const std::exception& e) {
  // A torch error's what() carries a C++ backtrace: its message alone.
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string why = torch_error ? torch_error->what_without_backtrace() : e.what();
  return why.substr(0, why.find('\n'));
}

namespace {

[[noreturn]] void not_a_chunk_file(const std::string& file, const std::string& why) {
  LOOM_USAGE("checkpoint file '", file, "' is not a loom checkpoint file of this format (", why,
             "); resume from another checkpoint");
}

// A format-1 file's chunks into `set`: a torch archive, whose tensors are all read when it is
// opened.
torch::Tensor legacy_chunks(const std::string& file, parallel::ChunkSink& set, bool keep_replicas) {
  torch::serialize::InputArchive ar;
  torch::Tensor names_t, meta, rng;
  std::vector<parallel::Chunk> chunks;
  try {
    ar.load_from(file);
    ar.read("index_names", names_t);
    ar.read("index_meta", meta);
    if (meta.dim() != 2 || meta.size(1) != kLegacyMetaCols || meta.scalar_type() != torch::kInt64)
      throw std::runtime_error("bad index");
    const std::string names(reinterpret_cast<const char*>(names_t.data_ptr<uint8_t>()),
                            static_cast<size_t>(names_t.numel()));
    auto m = meta.accessor<int64_t, 2>();
    std::istringstream in(names);
    for (int64_t i = 0; i < meta.size(0); ++i) {
      parallel::Chunk c;
      if (!std::getline(in, c.name) || m[i][3] < 0 || m[i][3] > kMaxDims)
        throw std::runtime_error("bad index");
      c.replica = static_cast<int>(m[i][0]);
      c.begin = m[i][1];
      c.shape.assign(&m[i][4], &m[i][4] + m[i][3]);
      torch::Tensor data;       // a fresh tensor per read (read() into a defined one calls set_())
      std::string key(1, 'c');  // not "c" + to_string(i): GCC 12 warns falsely on that
      ar.read(key += std::to_string(i), data);
      if (data.dim() != 1 || data.numel() != m[i][2]) throw std::runtime_error("bad chunk");
      c.data = data;
      if (keep_replicas || c.replica < 0) chunks.push_back(std::move(c));
    }
    ar.try_read("rng", rng);
  } catch (const std::exception& e) {
    not_a_chunk_file(file, exception_line(e));
  }
  for (auto& c : chunks) set.add(std::move(c));
  return rng;
}

// A checkpoint file open for reading at offsets (its chunks' elements are read where asked).
class OpenFile {
 public:
  explicit OpenFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) unreadable(std::strerror(errno));
  }
  ~OpenFile() { ::close(fd_); }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  void read_at(uint64_t offset, void* to, size_t n) const {
    auto* p = static_cast<char*>(to);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) unreadable(got < 0 ? std::strerror(errno) : "it ends early");
      p += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }

 private:
  [[noreturn]] void unreadable(const char* why) const {
    LOOM_USAGE("checkpoint file '", path_, "' is unreadable (", why,
               "); resume from another checkpoint");
  }
  std::string path_;
  int fd_ = -1;
};

// A format-2 chunk's elements: `numel` of `dtype` at `offset` of the file.
class StoredRecord : public parallel::StoredElements {
 public:
  StoredRecord(std::shared_ptr<const OpenFile> file, uint64_t offset, int64_t numel,
               torch::ScalarType dtype)
      : file_(std::move(file)), offset_(offset), numel_(numel), dtype_(dtype) {}
  int64_t numel() const override { return numel_; }
  torch::ScalarType dtype() const override { return dtype_; }
  void read(int64_t at, const torch::Tensor& out) const override {
    LOOM_CHECK(out.is_contiguous() && at >= 0 && at + out.numel() <= numel_,
               "read outside a stored chunk");
    const size_t size = c10::elementSize(dtype_);
    // Straight into `out` where it is host memory of the file's dtype; otherwise (a GPU's
    // tensor, another dtype) through host memory.
    const bool direct = out.is_cpu() && out.scalar_type() == dtype_;
    torch::Tensor to = direct ? out : torch::empty({out.numel()}, dtype_);
    file_->read_at(offset_ + static_cast<uint64_t>(at) * size, to.data_ptr(),
                   static_cast<size_t>(out.numel()) * size);
    if (!direct) out.copy_(to);
  }

 private:
  std::shared_ptr<const OpenFile> file_;
  uint64_t offset_;
  int64_t numel_;
  torch::ScalarType dtype_;
};

bool storable(int64_t dtype) {
  using torch::ScalarType;
  for (ScalarType t : {ScalarType::Float, ScalarType::Double, ScalarType::BFloat16,
                       ScalarType::Half, ScalarType::Long, ScalarType::Int, ScalarType::Byte})
    if (dtype == static_cast<int64_t>(t)) return true;
  return false;
}

// The chunks of the file at `file` into `set`, each still in the file: its index is read now,
// its elements when a reader asks for them (only those).
torch::Tensor chunks_from_file(const std::string& file, parallel::ChunkSink& set,
                               bool keep_replicas) {
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip;
  std::vector<parallel::Chunk> chunks;
  torch::Tensor rng;
  try {
    zip = std::make_unique<caffe2::serialize::PyTorchStreamReader>(file);
    if (!zip->hasRecord(kFormatRecord)) {
      zip.reset();
      return legacy_chunks(file, set, keep_replicas);
    }
    auto text = [&](const char* name) {
      auto [data, size] = zip->getRecord(name);
      return std::string(static_cast<const char*>(data.get()), size);
    };
    const std::string format = text(kFormatRecord);
    if (format != kFormat)
      LOOM_USAGE("checkpoint file '", file, "' is of format ", format, ", this loom reads ",
                 kFormat, " and 1; resume it with the loom that wrote it");
    const std::string names = text("index_names"), meta_bytes = text("index_meta");
    const size_t row_bytes = kMetaCols * sizeof(int64_t);
    if (meta_bytes.size() % row_bytes != 0) throw std::runtime_error("bad index");
    std::vector<int64_t> meta(meta_bytes.size() / sizeof(int64_t));
    std::memcpy(meta.data(), meta_bytes.data(), meta_bytes.size());
    auto open = std::make_shared<const OpenFile>(file);
    std::istringstream in(names);
    for (size_t i = 0; i < meta_bytes.size() / row_bytes; ++i) {
      const int64_t* row = &meta[i * kMetaCols];
      parallel::Chunk c;
      if (!std::getline(in, c.name) || row[2] < 0 || !storable(row[3]) || row[4] < 0 ||
          row[4] > kMaxDims)
        throw std::runtime_error("bad index");
      c.replica = static_cast<int>(row[0]);
      c.begin = row[1];
      c.shape.assign(row + 5, row + 5 + row[4]);
      // The chunk lies inside its tensor (whose size cannot overflow: at most 2^56 elements).
      int64_t total = 1;
      for (int64_t d : c.shape) {
        if (d < 0 || (d > 0 && total > (int64_t{1} << 56) / d))
          throw std::runtime_error("bad index");
        total *= d;
      }
      if (c.begin < 0 || c.begin > total || row[2] > total - c.begin)
        throw std::runtime_error("bad index");
      const auto dtype = static_cast<torch::ScalarType>(row[3]);
      const std::string record = record_of(i);
      if (zip->getRecordSize(record) != static_cast<size_t>(row[2]) * c10::elementSize(dtype))
        throw std::runtime_error("bad chunk");
      c.stored = std::make_shared<StoredRecord>(open, zip->getRecordOffset(record), row[2], dtype);
      if (keep_replicas || c.replica < 0) chunks.push_back(std::move(c));
    }
    if (zip->hasRecord("rng")) {
      auto [data, size] = zip->getRecord("rng");
      rng = torch::from_blob(data.get(), {static_cast<int64_t>(size)}, torch::kUInt8).clone();
    }
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    not_a_chunk_file(file, exception_line(e));
  }
  for (auto& c : chunks) set.add(std::move(c));
  return rng;
}

// The CRC-32 of the file's bytes, read a few MB at a time.
uint32_t crc32_of_file(const std::string& f) {
  std::ifstream in(f, std::ios::binary);
  std::string buf(4 << 20, '\0');
  uint32_t crc = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    crc = crc32_of(std::string_view(buf.data(), static_cast<size_t>(in.gcount())), crc);
  }
  if (!in.eof())
    LOOM_USAGE("checkpoint file '", f, "' is unreadable (", std::strerror(errno),
               "); resume from another checkpoint");
  return crc;
}

}  // namespace

torch::Tensor read_checkpoint_file(const std::string& dir, const Manifest& m, size_t i,
                                   parallel::ChunkSink& set, bool keep_replicas) {
  const Manifest::File& want = m.files.at(i);
  const std::string f = (std::filesystem::path(dir) / want.name).string();
  check_file_size(m, dir, i);
  const uint32_t crc = crc32_of_file(f);
  if (crc != want.crc32)
    LOOM_USAGE("checkpoint file '", f, "' does not match its manifest (CRC-32 ", crc,
               "; the manifest says ", want.crc32,
               "): it is damaged or from another run; resume from another checkpoint");
  return chunks_from_file(f, set, keep_replicas);
}

}  // namespace loom::train

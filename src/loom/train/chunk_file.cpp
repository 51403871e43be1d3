#include "loom/train/chunk_file.h"

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "loom/common/error.h"
#include "loom/common/files.h"

namespace loom::train {
namespace {

// The file is a zip of uncompressed records, each 64-byte aligned (torch's PyTorchStreamWriter,
// its records' zip CRC-32 fields left 0: the blocks' CRC-32s below check the elements, and the
// zip's would be a second pass over every byte of a save):
//   loom_chunks  the format, "2"
//   index_names  the chunks' names, one a line
//   index_meta   int64 a chunk, kMetaCols each: replica, begin, numel, dtype (c10::ScalarType),
//                ndim, dims (at most kMaxDims)
//   chunk/<i>    chunk i's elements
//   chunk_crc    int64 a block size B, then the uint32 CRC-32 of each B bytes of chunk 0's
//                elements (its last block shorter), then chunk 1's, ... (since 2026-12-07)
//   rng          the writer's RNG state (bytes), when it has one
// Numbers are little-endian. The file's index is every record but the chunks' elements; its
// CRC-32 (over the records' bytes in the order above) is in the manifest, so a reader checks the
// index when it opens the file and each block of elements it reads, and reads nothing else.
// Format 1 (before 2026-12-07) was a torch archive of tensors ("c<i>", "index_names",
// "index_meta" without the dtype column, "rng"); it is still read.
static_assert(std::endian::native == std::endian::little,
              "loom's checkpoint files are little-endian");
constexpr const char* kFormatRecord = "loom_chunks";
constexpr const char* kFormat = "2";
constexpr const char* kSumsRecord = "chunk_crc";
constexpr int64_t kMaxDims = 8, kMetaCols = 5 + kMaxDims, kLegacyMetaCols = 4 + kMaxDims;
// Small enough that a rank reading a part of a chunk reads little beyond it to check it.
constexpr int64_t kCheckBlock = int64_t{1} << 20;

std::atomic<int64_t> bytes_read{0};

std::string record_of(size_t i) {
  std::string key = "chunk/";  // not "chunk/" + to_string(i): GCC 12 warns falsely on that
  return key += std::to_string(i);
}

// The CRC-32 of each kCheckBlock bytes of `elements` onto `sums`; when given, `*whole` (the
// CRC-32 of the bytes before them) continued over them.
void sum_blocks(std::string_view elements, std::vector<uint32_t>& sums, uint32_t* whole) {
  for (size_t at = 0; at < elements.size(); at += kCheckBlock) {
    const std::string_view block = elements.substr(at, kCheckBlock);
    sums.push_back(crc32_of(block));
    if (whole) *whole = crc32_joined(*whole, sums.back(), static_cast<int64_t>(block.size()));
  }
}

uint32_t index_crc_of(std::initializer_list<std::string_view> records) {
  uint32_t crc = 0;
  for (std::string_view r : records) crc = crc32_of(r, crc);
  return crc;
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
  std::vector<uint32_t> block_sums;
  std::string_view elements;  // the chunk being written: its blocks' CRC-32s make the file's
  bool summed = false;
  caffe2::serialize::PyTorchStreamWriter zip(
      [&](const void* data, size_t n) {
        if (failure) return n;
        const std::string_view piece(static_cast<const char*>(data), n);
        try {
          file.write(piece);
          if (keep) keep->append(piece);
        } catch (...) {
          failure = std::current_exception();
          return n;
        }
        if (n > 0 && piece.data() == elements.data() && n == elements.size()) {
          sum_blocks(piece, block_sums, &sum.crc32);
          summed = true;
        } else {
          sum.crc32 = crc32_of(piece, sum.crc32);
        }
        sum.bytes += static_cast<int64_t>(n);
        return n;
      },
      /*compute_crc32=*/false);
  const std::string_view meta_bytes(reinterpret_cast<const char*>(meta.data()),
                                    meta.size() * sizeof(int64_t));
  zip.writeRecord(kFormatRecord, kFormat, std::strlen(kFormat));
  zip.writeRecord("index_names", names.data(), names.size());
  zip.writeRecord("index_meta", meta_bytes.data(), meta_bytes.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const torch::Tensor& d = chunks[i].data;
    elements = std::string_view(static_cast<const char*>(d.data_ptr()), d.nbytes());
    summed = false;
    zip.writeRecord(record_of(i), elements.data(), elements.size());
    if (!summed) sum_blocks(elements, block_sums, nullptr);  // written in pieces (or failed)
  }
  elements = {};
  std::string sums(sizeof(int64_t) + block_sums.size() * sizeof(uint32_t), '\0');
  std::memcpy(sums.data(), &kCheckBlock, sizeof(int64_t));
  std::memcpy(sums.data() + sizeof(int64_t), block_sums.data(),
              block_sums.size() * sizeof(uint32_t));
  zip.writeRecord(kSumsRecord, sums.data(), sums.size());
  std::string_view rng_bytes;
  torch::Tensor bytes;
  if (rng.defined()) {
    bytes = rng.to(torch::kCPU).contiguous();
    LOOM_CHECK(bytes.scalar_type() == torch::kUInt8, "an RNG state is bytes");
    rng_bytes = std::string_view(static_cast<const char*>(bytes.data_ptr()), bytes.nbytes());
    zip.writeRecord("rng", rng_bytes.data(), rng_bytes.size());
  }
  zip.writeEndOfFile();
  if (failure) std::rethrow_exception(failure);
  sum.index_crc32 = index_crc_of({kFormat, names, meta_bytes, sums, rng_bytes});
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
  throw DamagedCheckpoint(detail::concat("checkpoint file '", file,
                                         "' is not a loom checkpoint file of this format (", why,
                                         "); resume from another checkpoint"));
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

// A checkpoint file open for reading at offsets (its chunks' elements are read where asked),
// and the zip reader's source of bytes.
class OpenFile : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit OpenFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) unreadable(std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int why = errno;
      ::close(fd_);
      unreadable(std::strerror(why));
    }
    size_ = static_cast<size_t>(st.st_size);
  }
  ~OpenFile() override { ::close(fd_); }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  const std::string& path() const { return path_; }
  void read_at(uint64_t offset, void* to, size_t n) const {
    if (read(offset, to, n) != n) unreadable(errno ? std::strerror(errno) : "it ends early");
  }
  // The zip reader's: what was read (less than n: the file failed or ended; it says so).
  size_t size() const override { return size_; }
  size_t read(uint64_t offset, void* to, size_t n, const char* /*what*/ = "") const override {
    auto* p = static_cast<char*>(to);
    size_t done = 0;
    errno = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    bytes_read += static_cast<int64_t>(done);
    return done;
  }

 private:
  [[noreturn]] void unreadable(const char* why) const {
    throw DamagedCheckpoint(detail::concat("checkpoint file '", path_, "' is unreadable (", why,
                                           "); resume from another checkpoint"));
  }
  std::string path_;
  int fd_ = -1;
  size_t size_ = 0;
};

// The CRC-32 of each block of a chunk's elements, from the file's index.
struct BlockSums {
  std::shared_ptr<const std::vector<uint32_t>> crcs;  // null: the file was checked whole
  size_t first = 0;                                   // the chunk's first block in crcs
  uint64_t block = 0;                                 // bytes
};

// A format-2 chunk's elements: `numel` of `dtype` at `offset` of the file, each block checked
// against its CRC-32 as it is read.
class StoredRecord : public parallel::StoredElements {
 public:
  StoredRecord(std::shared_ptr<const OpenFile> file, std::string name, uint64_t offset,
               int64_t numel, torch::ScalarType dtype, BlockSums sums)
      : file_(std::move(file)),
        name_(std::move(name)),
        offset_(offset),
        numel_(numel),
        dtype_(dtype),
        sums_(std::move(sums)) {}
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
    read_bytes(static_cast<uint64_t>(at) * size, static_cast<char*>(to.data_ptr()),
               static_cast<uint64_t>(out.numel()) * size);
    if (!direct) out.copy_(to);
  }

 private:
  // Bytes [from, from + n) of the elements into `to`. Checked: the blocks inside the range are
  // read into `to` and checked there, a block the range cuts through is read whole into a
  // buffer.
  void read_bytes(uint64_t from, char* to, uint64_t n) const {
    if (!sums_.crcs) return file_->read_at(offset_ + from, to, n);
    const uint64_t block = sums_.block,
                   total = static_cast<uint64_t>(numel_) * c10::elementSize(dtype_), end = from + n;
    auto block_end = [&](uint64_t b) { return std::min(b + block, total); };
    for (uint64_t at = from; at < end;) {
      const uint64_t b = at - at % block;
      if (at == b && block_end(b) <= end) {  // whole blocks, up to the range's last one
        uint64_t run_end = block_end(b);
        while (run_end < end && block_end(run_end) <= end) run_end = block_end(run_end);
        file_->read_at(offset_ + b, to + (b - from), run_end - b);
        for (uint64_t k = b; k < run_end; k = block_end(k))
          check(k, std::string_view(to + (k - from), block_end(k) - k));
        at = run_end;
      } else {
        std::string buf(block_end(b) - b, '\0');
        file_->read_at(offset_ + b, buf.data(), buf.size());
        check(b, buf);
        const uint64_t upto = std::min(block_end(b), end);
        std::memcpy(to + (at - from), buf.data() + (at - b), upto - at);
        at = upto;
      }
    }
  }
  // The block of the elements that starts at byte `at`.
  void check(uint64_t at, std::string_view bytes) const {
    const uint32_t want = (*sums_.crcs)[sums_.first + at / sums_.block], crc = crc32_of(bytes);
    if (crc != want)
      throw DamagedCheckpoint(detail::concat(
          "checkpoint file '", file_->path(), "' does not match its manifest (bytes ", at, " to ",
          at + bytes.size(), " of '", name_, "': CRC-32 ", crc, ", its index says ", want,
          "): it is damaged; resume from another checkpoint"));
  }

  std::shared_ptr<const OpenFile> file_;
  std::string name_;
  uint64_t offset_;
  int64_t numel_;
  torch::ScalarType dtype_;
  BlockSums sums_;
};

bool storable(int64_t dtype) {
  using torch::ScalarType;
  for (ScalarType t : {ScalarType::Float, ScalarType::Double, ScalarType::BFloat16,
                       ScalarType::Half, ScalarType::Long, ScalarType::Int, ScalarType::Byte})
    if (dtype == static_cast<int64_t>(t)) return true;
  return false;
}

// What a reader checks of a file against its manifest entry.
struct Expected {
  std::optional<uint32_t> index_crc32;  // what is read, when the file has its blocks' CRC-32s
  std::function<void()> whole_file;     // otherwise the whole file, before anything is used
};

// The chunks of the file at `file` into `set`, each still in the file: its index is read now,
// its elements when a reader asks for them (only those).
torch::Tensor chunks_from_file(const std::string& file, parallel::ChunkSink& set,
                               bool keep_replicas, const Expected& expected) {
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip;
  std::vector<parallel::Chunk> chunks;
  torch::Tensor rng;
  try {
    auto open = std::make_shared<OpenFile>(file);
    zip = std::make_unique<caffe2::serialize::PyTorchStreamReader>(open);
    if (!zip->hasRecord(kFormatRecord)) {
      zip.reset();
      expected.whole_file();
      bytes_read += static_cast<int64_t>(open->size());  // torch's archive reads it all
      return legacy_chunks(file, set, keep_replicas);
    }
    const bool by_parts = expected.index_crc32 && zip->hasRecord(kSumsRecord);
    if (!by_parts) expected.whole_file();
    auto text = [&](const char* name) {
      auto [data, size] = zip->getRecord(name);
      return std::string(static_cast<const char*>(data.get()), size);
    };
    const std::string format = text(kFormatRecord);
    if (format != kFormat)
      LOOM_USAGE("checkpoint file '", file, "' is of format ", format, ", this loom reads ",
                 kFormat, " and 1; resume it with the loom that wrote it");
    const std::string names = text("index_names"), meta_bytes = text("index_meta");
    const std::string rng_bytes = zip->hasRecord("rng") ? text("rng") : std::string();
    BlockSums sums;
    if (by_parts) {
      const std::string crcs = text(kSumsRecord);
      const uint32_t crc = index_crc_of({format, names, meta_bytes, crcs, rng_bytes});
      if (crc != *expected.index_crc32)
        throw DamagedCheckpoint(detail::concat(
            "checkpoint file '", file, "' does not match its manifest (the CRC-32 of its index is ",
            crc, ", the manifest says ", *expected.index_crc32,
            "): it is damaged or from another run; resume from another checkpoint"));
      int64_t block = 0;
      if (crcs.size() < sizeof block || (crcs.size() - sizeof block) % sizeof(uint32_t) != 0)
        throw std::runtime_error("bad index");
      std::memcpy(&block, crcs.data(), sizeof block);
      if (block <= 0 || block > (int64_t{1} << 40)) throw std::runtime_error("bad index");
      auto all =
          std::make_shared<std::vector<uint32_t>>((crcs.size() - sizeof block) / sizeof(uint32_t));
      std::memcpy(all->data(), crcs.data() + sizeof block, all->size() * sizeof(uint32_t));
      sums = {std::move(all), 0, static_cast<uint64_t>(block)};
    }
    const size_t row_bytes = kMetaCols * sizeof(int64_t);
    if (meta_bytes.size() % row_bytes != 0) throw std::runtime_error("bad index");
    std::vector<int64_t> meta(meta_bytes.size() / sizeof(int64_t));
    std::memcpy(meta.data(), meta_bytes.data(), meta_bytes.size());
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
      const uint64_t bytes = static_cast<uint64_t>(row[2]) * c10::elementSize(dtype);
      if (zip->getRecordSize(record) != bytes) throw std::runtime_error("bad chunk");
      const BlockSums mine = sums;
      if (sums.crcs) {  // the chunk's blocks are the next ones in the list
        sums.first += (bytes + sums.block - 1) / sums.block;
        if (sums.first > sums.crcs->size()) throw std::runtime_error("bad index");
      }
      c.stored = std::make_shared<StoredRecord>(open, c.name, zip->getRecordOffset(record), row[2],
                                                dtype, mine);
      if (keep_replicas || c.replica < 0) chunks.push_back(std::move(c));
    }
    if (sums.crcs && sums.first != sums.crcs->size()) throw std::runtime_error("bad index");
    if (!rng_bytes.empty())
      rng = torch::from_blob(const_cast<char*>(rng_bytes.data()),
                             {static_cast<int64_t>(rng_bytes.size())}, torch::kUInt8)
                .clone();
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
    bytes_read += in.gcount();
  }
  if (!in.eof())
    throw DamagedCheckpoint(detail::concat("checkpoint file '", f, "' is unreadable (",
                                           std::strerror(errno),
                                           "); resume from another checkpoint"));
  return crc;
}

}  // namespace

torch::Tensor read_checkpoint_file(const std::string& dir, const Manifest& m, size_t i,
                                   parallel::ChunkSink& set, bool keep_replicas, FileCheck check) {
  const Manifest::File& want = m.files.at(i);
  const std::string f = (std::filesystem::path(dir) / want.name).string();
  check_file_size(m, dir, i);
  Expected expected;
  if (check == FileCheck::kWhatIsRead) expected.index_crc32 = want.index_crc32;
  expected.whole_file = [&] {
    const uint32_t crc = crc32_of_file(f);
    if (crc != want.crc32)
      throw DamagedCheckpoint(
          detail::concat("checkpoint file '", f, "' does not match its manifest (CRC-32 ", crc,
                         "; the manifest says ", want.crc32,
                         "): it is damaged or from another run; resume from another checkpoint"));
  };
  return chunks_from_file(f, set, keep_replicas, expected);
}

int64_t checkpoint_bytes_read() {
  return bytes_read.load();
}

}  // namespace loom::train

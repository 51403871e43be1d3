#include "loom/train/chunk_file.h"

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

// index_meta row: replica, begin, numel, ndim, dims (at most kMaxDims).
constexpr int64_t kMaxDims = 8, kMetaCols = 4 + kMaxDims;

std::string chunk_key(size_t i) {
  std::string key(1, 'c');  // not "c" + to_string(i): GCC 12 warns falsely on that
  return key += std::to_string(i);
}

}  // namespace

FileSum write_chunks(AtomicFile& file, const std::vector<parallel::Chunk>& chunks,
                     const torch::Tensor& rng, std::string* keep) {
  torch::serialize::OutputArchive ar;
  std::string names;
  torch::Tensor meta =
      torch::zeros({static_cast<int64_t>(chunks.size()), kMetaCols}, torch::kInt64);
  auto m = meta.accessor<int64_t, 2>();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const parallel::Chunk& c = chunks[i];
    LOOM_CHECK(c.name.find('\n') == std::string::npos && c.shape.size() <= kMaxDims,
               "chunk name or shape not storable: ", c.name);
    names += c.name + "\n";
    m[i][0] = c.replica;
    m[i][1] = c.begin;
    m[i][2] = c.data.numel();
    m[i][3] = static_cast<int64_t>(c.shape.size());
    for (size_t d = 0; d < c.shape.size(); ++d) m[i][4 + d] = c.shape[d];
    ar.write(chunk_key(i), c.data);
  }
  ar.write(
      "index_names",
      torch::from_blob(names.data(), {static_cast<int64_t>(names.size())}, torch::kUInt8).clone());
  ar.write("index_meta", meta);
  if (rng.defined()) ar.write("rng", rng);
  if (keep) {  // sized once for the archive (its records, their headers and padding)
    size_t size = 1 << 20;
    for (const auto& c : chunks) size += c.data.nbytes() + 512;
    keep->reserve(size);
  }
  // The archive's pieces go onto the file as they come (a record's data straight from its
  // tensor). The writer calls this from C code: a failure is kept and thrown after it returns.
  FileSum sum;
  std::exception_ptr failure;
  ar.save_to([&](const void* data, size_t n) {
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

// The chunks of the archive at `file` into `set` (records read one by one as they are taken).
torch::Tensor chunks_from_file(const std::string& file, parallel::ChunkSink& set,
                               bool keep_replicas) {
  torch::serialize::InputArchive ar;
  torch::Tensor names_t, meta, rng;
  std::vector<parallel::Chunk> chunks;
  try {
    ar.load_from(file);
    ar.read("index_names", names_t);
    ar.read("index_meta", meta);
    if (meta.dim() != 2 || meta.size(1) != kMetaCols || meta.scalar_type() != torch::kInt64)
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
      torch::Tensor data;  // a fresh tensor per read (read() into a defined one calls set_())
      ar.read(chunk_key(static_cast<size_t>(i)), data);
      if (data.dim() != 1 || data.numel() != m[i][2]) throw std::runtime_error("bad chunk");
      c.data = data;
      if (keep_replicas || c.replica < 0) chunks.push_back(std::move(c));
    }
    ar.try_read("rng", rng);
  } catch (const std::exception& e) {
    LOOM_USAGE("checkpoint file '", file, "' is not a loom checkpoint file of this format (",
               exception_line(e), "); resume from another checkpoint");
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

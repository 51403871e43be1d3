#include "loom/train/chunk_file.h"

#include <filesystem>
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

std::string chunks_to_bytes(const std::vector<parallel::Chunk>& chunks, const torch::Tensor& rng) {
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
  // Straight into one string sized for the archive (its records, their headers and padding):
  // through a stream, the bytes were copied as it grew and again out of it (twice as slow).
  size_t size = 1 << 20;
  for (const auto& c : chunks) size += c.data.nbytes() + 512;
  std::string out;
  out.reserve(size);
  ar.save_to([&out](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  return out;
}

std::string exception_line(const std::exception& e) {
  // A torch error's what() carries a C++ backtrace: its message alone.
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  std::string why = torch_error ? torch_error->what_without_backtrace() : e.what();
  return why.substr(0, why.find('\n'));
}

torch::Tensor chunks_from_bytes(const std::string& bytes, const std::string& file,
                                parallel::ChunkSet& set, bool keep_replicas) {
  torch::serialize::InputArchive ar;
  torch::Tensor names_t, meta, rng;
  std::vector<parallel::Chunk> chunks;
  try {
    ar.load_from(bytes.data(), bytes.size());
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

torch::Tensor read_checkpoint_file(const std::string& dir, const Manifest& m, size_t i,
                                   parallel::ChunkSet& set, bool keep_replicas) {
  const Manifest::File& want = m.files.at(i);
  const std::string f = (std::filesystem::path(dir) / want.name).string();
  check_file_size(m, dir, i);
  const std::string bytes = read_file(f);
  const uint32_t crc = crc32_of(bytes);
  if (static_cast<int64_t>(bytes.size()) != want.bytes || crc != want.crc32)
    LOOM_USAGE("checkpoint file '", f, "' does not match its manifest (", bytes.size(),
               " bytes, CRC-32 ", crc, "; the manifest says ", want.bytes, " bytes, CRC-32 ",
               want.crc32, "): it is damaged or from another run; resume from another checkpoint");
  return chunks_from_bytes(bytes, f, set, keep_replicas);
}

}  // namespace loom::train

#include "loom/train/consolidate.h"

#include <filesystem>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/train/chunk_file.h"

namespace loom::train {
namespace fs = std::filesystem;

CheckpointContents read_whole_checkpoint(const std::string& path) {
  CheckpointContents c;
  c.manifest = read_manifest(path, &c.dir);
  parallel::ChunkSet set;
  for (size_t i = 0; i < c.manifest.files.size(); ++i)
    read_checkpoint_file(c.dir, c.manifest, i, set);
  c.tensors = set.consolidate();
  return c;
}

void write_consolidated(const CheckpointContents& c, const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    LOOM_USAGE("--out '", out, "' exists and is not an empty folder; choose another");
  AtomicFolder folder(out, "choose another --out");
  std::vector<parallel::Chunk> chunks;
  for (const auto& [key, t] : c.tensors) chunks.push_back(t);
  const std::string bytes = chunks_to_bytes(chunks, torch::Tensor());
  Manifest m = c.manifest;
  Manifest::File f{"consolidated.pt", static_cast<int64_t>(bytes.size()), crc32_of(bytes), -1, {}};
  for (int s = 0; s < m.pp * m.loops; ++s) f.stages.push_back(s);
  m.files = {f};
  write_file_atomic(folder.file(f.name), bytes);
  // The run's settings go along, for a resume to say what it changes.
  if (const fs::path config = fs::path(c.dir) / "config.toml"; fs::exists(config, ec))
    write_file_atomic(folder.file("config.toml"), read_file(config.string()));
  write_file_atomic(folder.file("manifest.json"), manifest_to_json(m));
  folder.commit();
}

}  // namespace loom::train

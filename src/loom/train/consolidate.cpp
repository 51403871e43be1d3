#include "loom/train/consolidate.h"

#include <filesystem>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/train/chunk_file.h"

namespace loom::train {
namespace fs = std::filesystem;

CheckpointContents read_whole_checkpoint(const std::string& path,
                                         const std::function<bool(const std::string&)>& keep,
                                         FileCheck check) {
  CheckpointContents c;
  c.manifest = read_manifest(path, &c.dir);
  parallel::WholeTensors wholes(keep);
  for (size_t i = 0; i < c.manifest.files.size(); ++i)
    read_checkpoint_file(c.dir, c.manifest, i, wholes, true, check);
  c.tensors = wholes.take();
  return c;
}

void write_consolidated(const CheckpointContents& c, const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && !(fs::is_directory(out, ec) && fs::is_empty(out, ec)))
    LOOM_USAGE("--out '", out, "' exists and is not an empty folder; choose another");
  AtomicFolder folder(out, "choose another --out");
  std::vector<parallel::Chunk> chunks;
  for (const auto& [key, t] : c.tensors) chunks.push_back(t);
  Manifest m = c.manifest;
  Manifest::File f{"consolidated.pt", 0, 0, -1, {}};
  AtomicFile file(folder.file(f.name));
  const FileSum sum = write_chunks(file, chunks, torch::Tensor());
  file.commit();
  f.bytes = sum.bytes;
  f.crc32 = sum.crc32;
  f.index_crc32 = sum.index_crc32;
  for (int s = 0; s < m.pp * m.loops; ++s) f.stages.push_back(s);
  m.files = {f};
  // The run's settings go along, for a resume to say what it changes.
  if (const fs::path config = fs::path(c.dir) / "config.toml"; fs::exists(config, ec))
    write_file_atomic(folder.file("config.toml"), read_file(config.string()));
  write_file_atomic(folder.file("manifest.json"), manifest_to_json(m));
  folder.commit();
}

}  // namespace loom::train

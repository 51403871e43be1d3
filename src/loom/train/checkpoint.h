#pragma once
// Checkpoints: <dir>/step-<N>/rank-<r>.pt (each rank's stages: parameters, optimizer/sync
// state) and <dir>/step-<N>/manifest.json (rank 0, written last), then <dir>/latest names the
// newest complete step folder. Every file is written to a temporary name and renamed, so a
// crash never leaves a half-written checkpoint that looks complete.
#include <cstdint>
#include <string>

namespace loom::train {

struct Manifest {
  int64_t step = 0;  // steps completed
  int world = 1, dp = 1, pp = 1, loops = 1;
  std::string dp_mode, model_kind, schedule;
};

std::string manifest_to_json(const Manifest& m);
// Reads <path>/manifest.json, or follows <path>/latest. Throws UsageError when absent/corrupt.
Manifest read_manifest(const std::string& path, std::string* step_dir);
// Atomically replaces `path` with `content` (temp file + rename).
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace loom::train

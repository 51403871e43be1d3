#pragma once
// Checkpoints: <dir>/step-<N>/rank-<r>.pt (each rank's stages: parameters, optimizer/sync
// state) and <dir>/step-<N>/manifest.json (rank 0, written last), then <dir>/latest names the
// newest complete step folder. Every file is written to a temporary name, flushed to the disk
// (fsync) and renamed, and its folder flushed, so a crash never leaves a half-written
// checkpoint that looks complete. The manifest describes what the files hold (mesh, modes,
// model shape, optimizer, loom version) and carries each rank file's size and CRC-32: a
// checkpoint is checked against the run before any of its tensors is used.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loom/config/config.h"

namespace loom::train {

struct Resolved;

struct Manifest {
  struct File {
    int64_t bytes = 0;
    uint32_t crc32 = 0;
  };
  int64_t step = 0;  // steps completed
  int world = 1, dp = 1, pp = 1, loops = 1;
  std::string dp_mode, schedule, optimizer, dtype = "float32", loom_version;
  config::ModelConfig model;
  std::vector<File> files;  // rank r's file is files[r]
};

// The manifest of a run about to be saved, without files and step.
Manifest describe_run(const config::Config& cfg, const Resolved& r, int world);
std::string manifest_to_json(const Manifest& m);
// Reads <path>/manifest.json, or follows <path>/latest. Throws UsageError (one line naming
// the file) when absent, corrupt or written by another format.
Manifest read_manifest(const std::string& path, std::string* step_dir);
// UsageError naming the first difference between the checkpoint and the run that would load
// it (what the checkpoint was written with, what the run has, what to do).
void check_resumable(const Manifest& saved, const Manifest& run, const std::string& dir);

uint32_t crc32_of(std::string_view bytes);
// Writes `content` to `path` durably and atomically: temporary file, fsync, rename, fsync of
// the folder. Throws Error naming the file and the system's reason (e.g. "No space left on
// device"); the temporary file is removed and `path` keeps its previous content.
void write_file_atomic(const std::string& path, std::string_view content);
// The whole file; Error naming it when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace loom::train

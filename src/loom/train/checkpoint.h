#pragma once
// Checkpoints: <dir>/step-<N>/rank-<r>.pt (each rank's stages: parameters, optimizer and mode
// state as layout-independent chunks, chunk_file.h), <dir>/step-<N>/config.toml (the run's
// settings, for a resume to say what it changes) and <dir>/step-<N>/manifest.json (rank 0,
// written last; on hosts without a shared folder each host's lowest rank too: checkpointer.h),
// then <dir>/latest names the newest complete step folder. `loom checkpoint
// convert` writes the same with one file, consolidated.pt, holding every tensor whole. Every file
// is written to a temporary name, flushed to the disk (fsync) and renamed, and its folder flushed,
// so a crash never leaves a half-written checkpoint that looks complete. The manifest describes
// what the files hold (mesh, modes, model shape, optimizer, loom version, the partition into
// stages) and carries each file's size, CRC-32, dp rank, stages and index CRC-32: a checkpoint is
// checked against the run before any of its tensors is used, each file as it is read
// (chunk_file.h), and a run with another layout knows which files hold its blocks.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/common/error.h"
#include "loom/config/config.h"

namespace loom::train {

struct Resolved;

// A checkpoint file that is not what its manifest says (missing, cut short, damaged,
// unreadable): a resume from a run's checkpoint folder goes on from the newest intact
// checkpoint before it (Checkpointer::load).
class DamagedCheckpoint : public UsageError {
 public:
  using UsageError::UsageError;
};

struct Manifest {
  struct File {
    std::string name;  // in the step folder
    int64_t bytes = 0;
    uint32_t crc32 = 0;
    int dp_rank = -1;         // -1: every replica (consolidated)
    std::vector<int> stages;  // the stages whose state it holds
    // The CRC-32 of its index (chunk_file.h), which holds the CRC-32 of each MiB of its
    // elements: a resume checks what it reads, not the whole file. Absent in manifests
    // written before 2026-12-07 (the whole file is checked then).
    std::optional<uint32_t> index_crc32{};
  };
  int64_t step = 0;  // steps completed
  int world = 1, dp = 1, pp = 1, tp = 1, loops = 1;
  std::string placement = "looping";  // of the stages on the pipeline ranks: looping | v
  std::string dp_mode, schedule, optimizer, dtype = "float32", loom_version;
  config::ModelConfig model;
  int blocks = 0;           // the model's blocks
  std::vector<int> first;   // first block of each stage (pp * loops entries)
  std::vector<File> files;  // a run's checkpoint: rank r's file is files[r]
  // A saved checkpoint's: written by a run of `run`'s mesh and partition, one file per rank
  // (`run` is described by describe_run: it has no files yet).
  bool same_layout(const Manifest& run) const;
  std::string layout() const;  // "dp 2 x pp 2 x loops 1, zero3" (", v" if v)
};

// The manifest of a run about to be saved, without files and step.
Manifest describe_run(const config::Config& cfg, const Resolved& r, int world);
std::string manifest_to_json(const Manifest& m);
// The step folders in a run's checkpoint folder `root` that hold a manifest, oldest first.
std::vector<std::string> complete_checkpoints(const std::string& root);
// The step of a step folder's name: "step-000040" (and "abandoned-step-000040-2", a step folder
// a resume set aside) give 40; -1 for a name without "step-" and digits.
int64_t folder_step(const std::string& name);
// Where a resume goes when the checkpoint `dir` that `resume` led to is damaged: the newest
// complete checkpoint before it in its folder (its step folder's path); "" when there is none
// or when `resume` names `dir` itself (a step folder named by hand is not replaced).
std::string checkpoint_before(const std::string& resume, const std::string& dir);
// Reads <path>/manifest.json, or follows <path>/latest (the newest complete checkpoint in
// <path>, with a notice, when `latest` is missing or names none). Throws UsageError (one line
// naming the file) when absent, corrupt or written by another format. `quiet`: no notice (a
// preflight check, before the run that will say it).
Manifest read_manifest(const std::string& path, std::string* step_dir, bool quiet = false);
// UsageError naming the first difference between the checkpoint and the run that would load
// it that resharding cannot bridge (what the checkpoint was written with, what the run has,
// what to do). Returns one line describing the resharding ("" for the same layout).
std::string check_resumable(const Manifest& saved, const Manifest& run, const std::string& dir);
// UsageError when the checkpoint `dir` (of step `saved_step`) lies past the run's last step
// (`steps`, train.steps): the run would train nothing and replace its summary.
void check_steps_left(int64_t saved_step, int64_t steps, const std::string& dir);
// UsageError when file `i` of the manifest is missing from `step_dir` or has another size (a
// copy cut short): found with a stat before any rank starts (the CRC-32 is checked on loading).
void check_file_size(const Manifest& m, const std::string& step_dir, size_t i);

// What of a file is checked against its manifest: what is read (its index when it is opened,
// each MiB of elements as it is read: a rank that needs a part of a file reads that part), or
// the whole file before anything of it is used. Files whose manifest has no index CRC-32
// (written before 2026-12-07) are checked whole either way.
enum class FileCheck { kWhatIsRead, kWholeFile };

// The CRC-32 of `bytes` following bytes whose CRC-32 is `previous` (0: none before).
uint32_t crc32_of(std::string_view bytes, uint32_t previous = 0);
// The CRC-32 of two runs of bytes, one after the other, from theirs (`second_bytes`: the
// length of the second), without reading them again.
uint32_t crc32_joined(uint32_t first, uint32_t second, int64_t second_bytes);
}  // namespace loom::train

#pragma once
// Saving and resuming a run, in the format of checkpoint.h: each rank writes its stages'
// state to rank-<r>.pt (durably: temporary name, fsync, rename), the ranks exchange their
// files' sizes and checksums (and whether any failed: then all stop, the last checkpoint
// intact), rank 0 writes the manifest and the `latest` pointer and keeps the newest
// output.keep complete checkpoints, a barrier. Loading checks the manifest against the run
// and the rank file against its checksum before any tensor is used. On hosts whose run
// folders are their own, each host's lowest rank writes the manifests too, each rank file is
// also kept on the next host, and a resume fetches what a host lacks (host_copies.h).
// A save can also run in two parts (output.async_save): begin_save() copies the rank's state
// and a thread serializes and writes it while training goes on (as the file's bytes are made:
// the whole file is never in memory but to be sent to another host); on hosts without a shared
// folder the ranks' threads also exchange the files' sizes and checksums and copy the files to
// other hosts, over a communicator of their own. complete_pending() does the rest (the
// agreement on the files where the threads did not make it, the manifest) when the trainer
// finds every rank's thread done, or must have it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loom/comm/backend.h"
#include "loom/common/files.h"
#include "loom/config/config.h"
#include "loom/model/partition.h"
#include "loom/train/checkpoint.h"
#include "loom/train/host_copies.h"
#include "loom/train/metrics_copies.h"
#include "loom/train/preflight.h"

namespace loom::parallel {
class DataParallel;
class Stage;
class StageOptimizer;
}  // namespace loom::parallel

namespace loom::train {

// --overwrite: the previous run's metrics and checkpoints go (every rank removes what it sees;
// nodes need not share a file system).
void clear_run_folder(const std::string& dir);

class Checkpointer {
 public:
  using Stages = std::map<int, std::unique_ptr<parallel::Stage>>;
  using Syncs = std::map<int, std::unique_ptr<parallel::DataParallel>>;
  using Optimizers = std::map<int, std::unique_ptr<parallel::StageOptimizer>>;

  // world: every training rank. cut: the model's blocks into stages. stages, syncs,
  // optimizers: this rank's, by stage index.
  Checkpointer(const config::Config& cfg, const Resolved& r, comm::Backend& world,
               const model::Partition& cut, const Stages& stages, const Syncs& syncs,
               const Optimizers& optimizers);

  ~Checkpointer();  // a pending save's writer is joined; its checkpoint never completes

  // <output.dir>/checkpoint/step-<steps_done>, returned; collective over world. A pending save
  // is completed first (or is this one, when of the same step).
  std::string save(int64_t steps_done);
  // The first part of save(): this rank's state is copied (training may change it from here
  // on) and a thread serializes and writes it. A pending save of another step is completed
  // first. Collective (through that completion only). borrow: not copied (save(): the state
  // does not change until the save completes).
  void begin_save(int64_t steps_done, bool borrow = false);
  // The rest of the pending save: the folder written, or "" when none is pending. Collective.
  std::string complete_pending();
  // Whether every rank's writer of the pending save has finished (so that completing it waits
  // for nothing). Collective; false, without communicating, when none is pending.
  bool pending_written();
  // Restores this rank's state from a checkpoint folder (or its parent with `latest`) written
  // with any layout (dp x pp x loops x dp-mode; slim only into slim with the same dp): this
  // rank reads the pieces its stages and shards hold. Returns the steps it had completed.
  // From a run's checkpoint folder, a checkpoint whose files turn out damaged (any rank's
  // DamagedCheckpoint) gives way to the newest complete one before it, said in one line.
  int64_t load(const std::string& path);
  // At the run's end, after its summary (collective): on hosts without a shared run folder,
  // the metrics.jsonl lines rank 0 wrote since the last save reach every host's folder.
  void copy_last_metrics() {
    if (metrics_) metrics_->copy_new_lines();
  }
  // Step of the newest checkpoint this run wrote or loaded; 0 when there is none.
  int64_t last_step() const { return previous_; }

 private:
  struct Pending;
  Manifest this_run() const;  // without files and step
  // load() of the checkpoint `path` names, without going back; *dir: its step folder.
  int64_t load_checkpoint(const std::string& path, std::string* dir);
  // After a resume from the run folder's own checkpoint `dir` of `step`: newer checkpoints
  // there (a course the run leaves) move aside (abandoned-step-N, said once) and `latest`
  // names the resumed one.
  void leave_newer_checkpoints(const std::string& dir, int64_t step);
  // The step of the newest complete checkpoint before the one in `dir` that any rank has in
  // that checkpoint folder; -1 when none, or when `path` is `dir` itself (chosen by hand).
  int64_t older_checkpoint(const std::string& path, const std::string& dir);
  // Says (rank 0) how many bytes of the checkpoint's files the ranks read to resume: `read`,
  // this rank's.
  void report_reads(const Manifest& saved, int64_t read);
  // This rank's row of a save's exchange (checkpoint.cpp's saved_manifest reads it).
  std::vector<int64_t> exchange_row(const Pending& p) const;
  // The writer's part on hosts without a shared folder (over copies_world_, with the other
  // ranks' writers): the exchange, the copies of the rank files, `file` made durable, the
  // agreement on the outcome.
  void copy_to_hosts(Pending& p, std::vector<int64_t> row, Manifest run,
                     std::optional<AtomicFile>& file);
  // A save that failed on rank `failed` (its reason `failure`, when this rank knows it): what
  // it wrote is removed, then every rank throws the same AgreedError. Collective.
  [[noreturn]] void abandon(Pending& p, const std::vector<std::string>& received, int failed,
                            const std::string& failure, bool manifest_failed);
  bool writes_manifests() const { return groups_[world_.rank()] == world_.rank(); }
  const config::Config& cfg_;
  Resolved r_;
  comm::Backend& world_;
  model::Partition cut_;
  const Stages& stages_;
  const Syncs& syncs_;
  const Optimizers& optimizers_;
  // By world rank, the lowest rank that sees the same run folder (shared_folder.h): each
  // group's lowest rank writes the manifests into its folder.
  std::vector<int> groups_;
  std::vector<FileCopy> copies_;  // each save's rank files carried to the next host
  // With copies_: the writers' own communicator (the same ranks), so that a save's exchange
  // and copies run beside the training's collectives.
  std::unique_ptr<comm::Backend> copies_world_;
  std::unique_ptr<MetricsCopies> metrics_;  // with copies_: metrics.jsonl on every host
  int64_t previous_ = 0;  // step of the newest checkpoint this run wrote or loaded (0: none)
  std::unique_ptr<Pending> pending_;  // the save begun and not completed
};

}  // namespace loom::train

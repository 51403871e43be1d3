#include "loom/train/checkpointer.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <thread>
#include <tuple>
#include <vector>

#include "loom/common/agreed_usage_error.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/log.h"
#include "loom/model/tensor_parallel.h"
#include "loom/parallel/data_parallel.h"
#include "loom/parallel/optimizer.h"
#include "loom/parallel/stage_state.h"
#include "loom/train/checkpoint.h"
#include "loom/train/checkpoint_hosts.h"
#include "loom/train/chunk_file.h"
#include "loom/train/fault_injection.h"
#include "loom/train/host_copies.h"
#include "loom/train/metrics_copies.h"
#include "loom/train/preflight.h"
#include "loom/train/report.h"
#include "loom/train/resume_check.h"
#include "loom/train/shared_folder.h"

namespace loom::train {
namespace fs = std::filesystem;

namespace {

// A save's exchange row: bytes, crc32, index crc32, dp rank, then the stages.
constexpr int kRowHead = 4;

std::string rank_file(int rank) {
  char file[32];
  std::snprintf(file, sizeof file, "rank-%05d.pt", rank);
  return file;
}

// A checkpoint's chunks, read file by file as the stages ask for them: the files most likely to
// hold what this rank needs first (its own, then its replica's), the next one only when a
// request is not covered yet. Under the layout that wrote it, a rank reads its own file only.
// Of each file it keeps what wanted() lets through (the stages' own state).
class CheckpointReader : public parallel::ChunkReader {
 public:
  // run_tp: this run's tensor-parallel degree (the checkpoint's is in the manifest).
  CheckpointReader(std::string dir, const Manifest& m, std::vector<size_t> files,
                   bool keep_replicas, int run_tp)
      : dir_(std::move(dir)),
        m_(m),
        files_(std::move(files)),
        keep_replicas_(keep_replicas),
        run_tp_(run_tp) {}
  bool get(const std::string& name, int replica, int64_t begin, torch::Tensor out) const override {
    if (read(name, replica, begin, out)) return true;
    return m_.tp != run_tp_ && from_other_tp(name, replica, begin, out);
  }
  // The RNG state of the first file read (undefined before, or if it has none).
  const torch::Tensor& first_rng() const { return first_rng_; }
  // What to keep of the files: to be told before the first get().
  parallel::ChunkFilter& wanted() { return wanted_; }

 private:
  bool read(const std::string& name, int replica, int64_t begin, torch::Tensor& out) const {
    while (!set_.covers(name, replica, begin, out.numel()) && next_ < files_.size()) {
      torch::Tensor rng = read_checkpoint_file(dir_, m_, files_[next_], wanted_, keep_replicas_);
      if (next_++ == 0) first_rng_ = rng;
    }
    return set_.get(name, replica, begin, out);
  }
  // The whole tensor `name`, undefined when the checkpoint has none.
  torch::Tensor whole(const std::string& name, int replica) const {
    torch::Tensor none = torch::empty({0});
    if (!read(name, replica, 0, none)) return {};
    const std::vector<int64_t>& shape = *set_.shape(name, replica);
    torch::Tensor t = torch::empty(shape, torch::kFloat32);
    torch::Tensor flat = t.view({-1});
    read(name, replica, 0, flat);
    return t;
  }
  // "<key>/<param>#tp<j>of<T>" (or without the suffix) under another tensor-parallel degree:
  // the parameter's parts in the checkpoint joined (tp_unshard), this run's part cut
  // (tp_shard), once per tensor (a ZeRO shard asks for it in pieces).
  bool from_other_tp(const std::string& name, int replica, int64_t begin,
                     torch::Tensor& out) const {
    auto [it, fresh] = recut_.try_emplace({name, replica});
    if (fresh) it->second = recut(name, replica);
    const torch::Tensor& mine = it->second;
    if (!mine.defined()) return false;
    if (begin + out.numel() > mine.numel())
      LOOM_USAGE("checkpoint tensor '", name, "' (from tp ", m_.tp, ") has ", mine.numel(),
                 " elements, this run needs [", begin, ", ", begin + out.numel(), ")");
    out.copy_(mine.reshape({-1}).slice(0, begin, begin + out.numel()));
    return true;
  }
  // This run's part `name` from the checkpoint's parts; undefined when it has none.
  torch::Tensor recut(const std::string& name, int replica) const {
    const parallel::ChunkName n = parallel::parse_chunk_name(name);
    if (n.param.empty()) return {};
    const std::string prefix = n.key + "/" + n.param;
    std::vector<torch::Tensor> saved;
    for (int i = 0; i < m_.tp; ++i) {
      saved.push_back(
          whole(m_.tp == 1 ? prefix : detail::concat(prefix, "#tp", i, "of", m_.tp), replica));
      if (!saved.back().defined()) return {};
    }
    return model::tp_shard(n.param, model::tp_unshard(n.param, saved), std::max(n.part, 0),
                           n.parts);
  }

  std::string dir_;
  const Manifest& m_;
  std::vector<size_t> files_;
  bool keep_replicas_;
  int run_tp_;
  mutable parallel::ChunkSet set_;
  mutable parallel::ChunkFilter wanted_{set_};
  mutable size_t next_ = 0;
  mutable torch::Tensor first_rng_;
  mutable std::map<std::pair<std::string, int>, torch::Tensor> recut_;  // from_other_tp()
};

// The files that hold state of any block of this rank's stages: its own file first, then
// those of its replica, then the rest.
std::vector<size_t> files_to_read(const Manifest& saved, const model::Partition& cut,
                                  const Checkpointer::Stages& stages, int rank, int dp_rank) {
  auto end_of = [&](int s) {
    return s + 1 < static_cast<int>(saved.first.size()) ? saved.first[s + 1] : saved.blocks;
  };
  std::vector<size_t> out;
  for (size_t i = 0; i < saved.files.size(); ++i) {
    bool overlaps = false;
    for (int old : saved.files[i].stages)
      for (const auto& [s, st] : stages)
        overlaps |= saved.first[old] < cut.end(s) && cut.begin(s) < end_of(old);
    if (overlaps) out.push_back(i);
  }
  auto rank_of = [&](size_t i) {
    return std::make_tuple(static_cast<int>(i) != rank, saved.files[i].dp_rank != dp_rank, i);
  };
  std::sort(out.begin(), out.end(), [&](size_t a, size_t b) { return rank_of(a) < rank_of(b); });
  return out;
}

std::string step_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return name;
}

bool is_step_folder(const fs::directory_entry& e) {
  return e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0;
}

// What a crash during a save leaves behind: temporary files, and step folders whose manifest
// was never written. Removed at start, so that they can neither fill the disk nor be mistaken
// for a checkpoint. Each rank removes the temporary files it sees (nodes need not share a file
// system); only rank 0, which writes the manifests, can tell an incomplete folder.
void remove_debris(const fs::path& root, bool writes_manifests) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.find(".tmp") != std::string::npos) {
      fs::remove(e.path(), ec);
    } else if (is_step_folder(e) && writes_manifests &&
               !fs::exists(e.path() / "manifest.json", ec)) {
      fs::remove_all(e.path(), ec);
    } else if (is_step_folder(e)) {
      for (const auto& f : fs::directory_iterator(e.path(), ec))
        if (f.path().filename().string().find(".tmp") != std::string::npos)
          fs::remove(f.path(), ec);
    }
  }
}

// The run folder's own files rewritten whole (metrics.jsonl, cut back at a resume or taken from
// another host's copy) leave "<name>.tmp<tag>" behind when the process dies during the write:
// removed at start like a save's debris (the run's own files only, not other names).
void remove_temporary_files(const fs::path& dir) {
  static const std::regex temporary(R"(.+\.tmp(-r)?[0-9]+)");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec) && std::regex_match(e.path().filename().string(), temporary))
      fs::remove(e.path(), ec);
}

// Keeps the newest `keep` complete checkpoints (a manifest writer, after `latest` points at the
// new one). Step folders older than the newest that never got a manifest go too: a save that
// failed or was cut short (on a host other than rank 0's, remove_debris leaves them).
void prune(const fs::path& root, size_t keep) {
  const std::vector<std::string> complete = complete_checkpoints(root.string());
  std::error_code ec;
  for (size_t i = 0; i + keep < complete.size(); ++i) fs::remove_all(complete[i], ec);
  if (complete.empty()) return;
  const std::string newest = fs::path(complete.back()).filename().string();
  for (const auto& e : fs::directory_iterator(root, ec))
    if (is_step_folder(e) && e.path().filename().string() < newest &&
        !fs::exists(e.path() / "manifest.json", ec))
      fs::remove_all(e.path(), ec);
}

// The complete checkpoints in `root` of steps after `step` (of a course a resume leaves), moved
// to "abandoned-step-N": kept for the user, but neither resumed by the folder's name, pruned,
// nor written into by this course's saves (a save into a folder that holds a manifest would
// look complete before it is). Returns "step-N moved to abandoned-step-N" for each.
std::vector<std::string> set_aside_newer(const fs::path& root, int64_t step) {
  std::vector<std::string> moved;
  std::error_code ec;
  for (const std::string& f : complete_checkpoints(root.string())) {
    const std::string name = fs::path(f).filename().string();
    if (folder_step(name) <= step) continue;
    fs::path to = root / ("abandoned-" + name);
    for (int k = 2; fs::exists(to, ec); ++k) to = root / detail::concat("abandoned-", name, "-", k);
    fs::rename(f, to, ec);
    if (!ec) moved.push_back(name + " moved to " + to.filename().string());
  }
  return moved;
}

// The rank's own file in step folders older than the newest `keep`; empty folders go too.
void prune_own(const fs::path& root, size_t keep, int rank) {
  std::vector<fs::path> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (is_step_folder(e)) steps.push_back(e.path());
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + keep < steps.size(); ++i) {
    fs::remove(steps[i] / rank_file(rank), ec);
    fs::remove(steps[i], ec);  // only if empty
  }
}

// The manifest of a checkpoint whose parts `all` (save()'s gather: per entries a rank) are
// written. m: the run's description (Checkpointer::this_run()).
Manifest saved_manifest(Manifest m, const std::vector<int64_t>& all, int per, int64_t steps_done) {
  m.step = steps_done;
  for (size_t q = 0; q * per < all.size(); ++q) {
    const int64_t* f = &all[per * q];
    Manifest::File file{rank_file(static_cast<int>(q)), f[0], static_cast<uint32_t>(f[1]),
                        static_cast<int>(f[3]),         {},   static_cast<uint32_t>(f[2])};
    for (int k = kRowHead; k < per; ++k)
      if (f[k] >= 0) file.stages.push_back(static_cast<int>(f[k]));
    m.files.push_back(std::move(file));
  }
  return m;
}

// A manifest writer (rank 0, and on hosts with run folders of their own the lowest rank of each
// host): the step folder's config and manifest, then `latest`, then the pruning of the oldest.
void write_manifest(const Manifest& m, const fs::path& dir, const fs::path& root, size_t keep,
                    const std::string& config_toml, int rank) {
  const int64_t steps_done = m.step;
  // The run's settings, for a resume to say what it changes (resume_check.h: changed_course).
  write_file_atomic((dir / "config.toml").string(), config_toml);
  inject_disk_full(rank, steps_done, "manifest-disk-full", (dir / "manifest.json").string());
  write_file_atomic((dir / "manifest.json").string(), manifest_to_json(m));
  write_file_atomic((root / "latest").string(), dir.filename().string() + "\n");
  prune(root, keep);
}

// One line when the resumed run's settings change its course from the saved run's (its
// config.toml in the step folder; a checkpoint without one, or an unreadable one, says nothing).
void report_changed_course(const std::string& dir, int64_t step, const config::Config& now) {
  const fs::path file = fs::path(dir) / "config.toml";
  std::error_code ec;
  if (!fs::exists(file, ec)) return;
  std::string changes;
  try {
    changes =
        changed_course(config::from_toml_string(read_file(file.string()), file.string()), now);
  } catch (const Error&) {  // written by another version of loom: nothing to compare with
    return;
  }
  if (!changes.empty())
    log::info0(detail::concat("resuming step ", step, " with settings its run did not have: ",
                              changes, "; from here the run takes another course"));
}

}  // namespace

void clear_run_folder(const std::string& dir) {
  std::error_code ec;  // ranks sharing a file system race to remove the same files
  fs::remove_all(fs::path(dir) / "checkpoint", ec);
  fs::remove(fs::path(dir) / "metrics.jsonl", ec);
}

Checkpointer::Checkpointer(const config::Config& cfg, const Resolved& r, comm::Backend& world,
                           const model::Partition& cut, const Stages& stages, const Syncs& syncs,
                           const Optimizers& optimizers)
    : cfg_(cfg),
      r_(r),
      world_(world),
      cut_(cut),
      stages_(stages),
      syncs_(syncs),
      optimizers_(optimizers) {
  groups_ = folder_groups(world_.size(), say_if_not_shared(world_, cfg_.output.dir));
  copies_ = copies_to_next_group(groups_, static_cast<int>(cfg_.output.host_copies));
  if (!copies_.empty()) {
    metrics_ = std::make_unique<MetricsCopies>(
        world_, (fs::path(cfg_.output.dir) / "metrics.jsonl").string(), writes_manifests());
    copies_world_ = world_.host_world().split(0, world_.rank(), "checkpoint copies");
  }
  remove_debris(fs::path(cfg_.output.dir) / "checkpoint", world_.rank() == 0);
  remove_temporary_files(cfg_.output.dir);
  world_.barrier()->wait();  // no rank writes a checkpoint while rank 0 may still remove debris
}

// A save between begin_save() and complete_pending(). The writer thread serializes the copied
// (or borrowed) state onto this rank's file and makes it durable; on hosts without a shared
// folder it also does what the ranks' writers do together over their own communicator: the
// exchange of the files' sizes and checksums, the copies to other hosts and the agreement on
// their outcome. Then `written` is set and it ends; the rest is its to write until then.
struct Checkpointer::Pending {
  int64_t step = 0;
  fs::path dir;
  std::string file;
  std::string bytes;  // the file's, to send to other hosts (empty without copies)
  int64_t size = 0;
  uint32_t crc = 0;
  uint32_t index_crc = 0;
  std::string failure;  // this rank's, in one line ("": none)
  // With copies to other hosts: every rank's row (exchange_row()), the first rank that failed
  // (-1: none) and the copies this rank received.
  std::vector<int64_t> all;
  int failed = -1;
  std::vector<std::string> received;
  // What stopped the writers' communication (a peer gone, a timeout), rethrown on the training
  // thread by complete_pending() as if it had communicated itself.
  std::exception_ptr broken;
  std::atomic<bool> written = false;
  std::jthread writer;  // last: joined before the rest goes
};

std::vector<int64_t> Checkpointer::exchange_row(const Pending& p) const {
  // bytes (-1: this rank failed), crc32, index crc32, dp rank, the stages (loops of them, -1
  // padded)
  std::vector<int64_t> row(kRowHead + r_.loops, -1);
  row[0] = p.failure.empty() ? p.size : -1;
  row[1] = p.crc;
  row[2] = p.index_crc;
  row[3] = syncs_.begin()->second->dp_rank();
  int k = kRowHead;
  for (const auto& [s, st] : stages_) row[k++] = s;
  return row;
}

namespace {

// Every rank's exchange row over `net`; *failed: the first rank whose row says it failed.
std::vector<int64_t> exchange(comm::Backend& net, const std::vector<int64_t>& mine, int* failed) {
  const size_t per = mine.size();
  std::vector<int64_t> all(per * net.size());
  net.all_gather(mine.data(), all.data(), per, comm::DType::Int64)->wait();
  *failed = -1;
  for (int q = 0; q < net.size() && *failed < 0; ++q)
    if (all[per * q] < 0) *failed = q;
  return all;
}

}  // namespace

Checkpointer::~Checkpointer() = default;

bool Checkpointer::pending_written() {
  if (!pending_) return false;
  int32_t written = pending_->written ? 1 : 0;
  world_.all_reduce(&written, 1, comm::DType::Int32, comm::ReduceOp::Min)->wait();
  return written == 1;
}

std::string Checkpointer::save(int64_t steps_done) {
  begin_save(steps_done, /*borrow=*/true);
  return complete_pending();
}

void Checkpointer::begin_save(int64_t steps_done, bool borrow) {
  if (pending_ && pending_->step == steps_done) return;
  complete_pending();
  auto p = std::make_unique<Pending>();
  p->step = steps_done;
  p->dir = fs::path(cfg_.output.dir) / "checkpoint" / step_name(steps_done);
  p->file = (p->dir / rank_file(world_.rank())).string();
  // The state is copied here (unless borrowed), before the next step changes it; serialized
  // by the thread: the bytes written are the bytes checksummed, and a failing disk is reported
  // by the system call that failed (ENOSPC, EIO), naming the file.
  parallel::ChunkWriter w(borrow);
  torch::Tensor rng;
  try {
    std::error_code ec;
    fs::create_directories(p->dir, ec);  // every rank: nodes need not share a file system
    if (ec) throw Error("cannot write '" + p->dir.string() + "': " + ec.message());
    for (const auto& [s, y] : syncs_) parallel::save_stage_state(*y, *optimizers_.at(s), w);
    rng = at::detail::getDefaultCPUGenerator().get_state();
  } catch (const Error& e) {
    p->failure = e.what();  // the thread still takes part in the writers' exchange
    w.chunks().clear();
  }
  std::vector<int64_t> row = exchange_row(*p);
  p->writer = std::jthread([this, p = p.get(), chunks = std::move(w.chunks()), rng,
                            row = std::move(row), run = this_run()]() mutable {
    const int rank = world_.rank();
    std::optional<AtomicFile> file;
    if (p->failure.empty()) {
      try {
        inject_slow_write(rank, p->step);
        inject_disk_full(rank, p->step, "disk-full", p->file);
        file.emplace(p->file);
        const FileSum sum = write_chunks(*file, chunks, rng, copies_world_ ? &p->bytes : nullptr);
        p->size = sum.bytes;
        p->crc = sum.crc32;
        p->index_crc = sum.index_crc32;
      } catch (const std::exception& e) {
        p->failure = exception_line(e);
      }
    }
    chunks.clear();
    if (copies_world_) {
      try {
        copy_to_hosts(*p, std::move(row), run, file);
      } catch (...) {
        p->broken = std::current_exception();
      }
    } else if (p->failure.empty()) {
      try {
        file->commit();
      } catch (const std::exception& e) {
        p->failure = exception_line(e);
      }
    }
    file.reset();  // a file not committed goes
    p->written = true;
  });
  pending_ = std::move(p);
}

void Checkpointer::copy_to_hosts(Pending& p, std::vector<int64_t> row, Manifest run,
                                 std::optional<AtomicFile>& file) {
  comm::Backend& net = *copies_world_;
  row[0] = p.failure.empty() ? p.size : -1;
  row[1] = p.crc;
  row[2] = p.index_crc;
  p.all = exchange(net, row, &p.failed);
  if (p.failed < 0) {
    const Manifest m = saved_manifest(std::move(run), p.all, static_cast<int>(row.size()), p.step);
    const int rank = world_.rank();
    inject_slow_copy(rank, p.step);
    p.failure = run_copies(
        net, copies_, m.files, p.dir.string(), [&](int) { return in_memory(p.bytes); },
        [&](const std::string& path) { inject_disk_full(rank, p.step, "copy-disk-full", path); });
    for (const FileCopy& c : copies_)
      if (c.to == rank) p.received.push_back((p.dir / m.files[c.file].name).string());
    if (p.failure.empty()) {  // durable after the copies: the disk had their time to catch up
      try {
        file->commit();
      } catch (const std::exception& e) {
        p.failure = exception_line(e);
      }
    }
    const std::vector<int> broken = ranks_where(net, !p.failure.empty());
    if (!broken.empty()) p.failed = broken.front();
  }
  p.bytes = std::string();
}

std::string Checkpointer::complete_pending() {
  if (!pending_) return "";
  // Gone (its writer joined) however this ends.
  const std::unique_ptr<Pending> p = std::move(pending_);
  const fs::path root = fs::path(cfg_.output.dir) / "checkpoint";
  if (p->writer.joinable()) p->writer.join();
  if (p->broken) std::rethrow_exception(p->broken);
  std::string failure = p->failure;
  // With copies to other hosts the writers exchanged their rows (and copied the files).
  int failed = p->failed;  // the first rank that could not write its part (or its copy)
  const std::vector<int64_t> all =
      copies_world_ ? p->all : exchange(world_, exchange_row(*p), &failed);
  const Manifest m =
      failed < 0 ? saved_manifest(this_run(), all, kRowHead + r_.loops, p->step) : Manifest{};
  const std::vector<std::string>& received = p->received;
  bool manifest_failed = false;
  if (failed < 0) {
    if (writes_manifests()) {
      try {
        write_manifest(m, p->dir, root, static_cast<size_t>(cfg_.output.keep),
                       config::to_toml(cfg_), world_.rank());
      } catch (const Error& e) {
        failure = e.what();
      }
    }
    // The writers' outcome to every rank; also orders their pruning before prune_own below.
    const std::vector<int> broken = ranks_where(world_, !failure.empty());
    if (!broken.empty()) {
      failed = broken.front();
      manifest_failed = true;
    }
  }
  if (failed >= 0) abandon(*p, received, failed, failure, manifest_failed);
  previous_ = p->step;
  if (metrics_) metrics_->copy_new_lines();
  // Nodes need not share a file system: every rank removes its own file from the step
  // folders its host's writer no longer keeps (on a shared one they are gone already).
  if (!writes_manifests()) prune_own(root, static_cast<size_t>(cfg_.output.keep), world_.rank());
  return p->dir.string();
}

void Checkpointer::abandon(Pending& p, const std::vector<std::string>& received, int failed,
                           const std::string& failure, bool manifest_failed) {
  // Nothing of a checkpoint that will not exist stays behind to fill the disk: the manifests
  // first (so the folder never looks complete), every rank's part and copies, then the folder.
  // Not when it may be the intact one (the step this run resumed from, written again).
  if (p.step != previous_) {
    std::error_code ec;
    if (writes_manifests()) {
      fs::remove(p.dir / "manifest.json", ec);
      fs::remove(p.dir / "config.toml", ec);
    }
    fs::remove(p.file, ec);
    for (const std::string& f : received) fs::remove(f, ec);
    world_.barrier()->wait();
    fs::remove(p.dir, ec);  // only if empty: with a shared file system, one rank removes it
  }
  const std::string kept = previous_ ? "step " + std::to_string(previous_) : "none";
  const std::string tail = detail::concat("checkpoint ", step_name(p.step),
                                          " not written, the last one (", kept, ") is intact");
  // Every rank ends here; the one whose write failed names the file and the reason.
  if (!failure.empty()) throw AgreedError(detail::concat(failure, "; ", tail), failed);
  throw AgreedError(detail::concat("rank ", failed, " could not write ",
                                   manifest_failed ? "the manifest" : "its part", "; ", tail),
                    failed);
}

void Checkpointer::report_reads(const Manifest& saved, int64_t read) {
  world_.all_reduce(&read, 1, comm::DType::Int64, comm::ReduceOp::Sum)->wait();
  int64_t held = 0;
  for (const Manifest::File& f : saved.files) held += f.bytes;
  log::info0(detail::concat("the ranks read ", human_bytes(double(read)), " of the checkpoint's ",
                            human_bytes(double(held)), " (", saved.files.size(),
                            saved.files.size() == 1 ? " file)" : " files)"));
}

Manifest Checkpointer::this_run() const {
  Manifest m = describe_run(cfg_, r_, world_.size());
  m.blocks = cut_.blocks;
  m.first = cut_.first;
  return m;
}

int64_t Checkpointer::load(const std::string& path) {
  std::string from = path;
  for (;;) {
    std::string dir;
    try {
      const int64_t step = load_checkpoint(from, &dir);
      leave_newer_checkpoints(dir, step);
      return step;
    } catch (const AgreedDamagedCheckpoint& e) {
      const int64_t older = older_checkpoint(path, dir);
      if (older < 0) throw;
      std::string why = e.what();
      const std::string advice = "resume from another checkpoint";  // after "; " or ": "
      if (why.size() > advice.size() + 2 && why.ends_with(advice))
        why.resize(why.size() - advice.size() - 2);
      if (world_.rank() == e.reporter())
        log::warn(detail::concat(why, "; resuming from ", step_name(older),
                                 ", the newest checkpoint before it"));
      from = (fs::path(dir).parent_path() / step_name(older)).string();
    }
  }
}

void Checkpointer::leave_newer_checkpoints(const std::string& dir, int64_t step) {
  const fs::path root = fs::path(cfg_.output.dir) / "checkpoint";
  std::error_code ec;
  if (!resumes_own_folder(cfg_.output) || !fs::equivalent(fs::path(dir).parent_path(), root, ec))
    return;
  if (writes_manifests()) {
    const std::vector<std::string> moved = set_aside_newer(root, step);
    if (!moved.empty())  // the resumed folder (an abandoned one too, resumed by its path)
      write_file_atomic((root / "latest").string(), fs::path(dir).filename().string() + "\n");
    std::string what;
    for (const std::string& m : moved) what += (what.empty() ? "" : ", ") + m;
    if (world_.rank() == 0 && !moved.empty())
      log::warn(detail::concat(
          "resuming ", fs::path(dir).filename().string(), " of ", root.string(),
          ", which holds newer checkpoints: the run goes on from step ", step,
          "; of the course it leaves, ", what, " (resume by that folder's path, or delete it)"));
  }
  world_.barrier()->wait();  // no save of this course before the folders moved
}

int64_t Checkpointer::older_checkpoint(const std::string& path, const std::string& dir) {
  const std::string before = checkpoint_before(path, dir);
  int64_t newest = before.empty() ? -1 : folder_step(fs::path(before).filename().string());
  world_.all_reduce(&newest, 1, comm::DType::Int64, comm::ReduceOp::Max)->wait();
  return newest;
}

int64_t Checkpointer::load_checkpoint(const std::string& path, std::string* dir_out) {
  std::string& dir = *dir_out;
  Manifest saved;
  const Manifest run = this_run();
  std::string reshard;
  // The ranks agree on what they read (a refusal is said once).
  agree_on_manifest(world_, path, &saved, &dir);
  agreed_check(world_, [&] {
    reshard = check_resumable(saved, run, dir);
    check_steps_left(saved.step, cfg_.train.steps, dir);
    if (saved.blocks != run.blocks)
      LOOM_USAGE("checkpoint '", dir, "' holds a model of ", saved.blocks, " blocks, this run has ",
                 run.blocks, "; resume it with the model that wrote it");
  });
  if (!reshard.empty()) log::info0(reshard);
  if (world_.rank() == 0) report_changed_course(dir, saved.step, cfg_);
  const int dp_rank = syncs_.begin()->second->dp_rank();
  // This rank's own file holds exactly its state (the ranks may sit in another order).
  const Manifest::File* own =
      world_.rank() < static_cast<int>(saved.files.size()) ? &saved.files[world_.rank()] : nullptr;
  std::vector<int> mine;
  for (const auto& [s, st] : stages_) mine.push_back(s);
  // A per-replica mode's replicas (slim, diloco) load their own model under the same dp and
  // mode, otherwise the mean of all the saved ones (parallel/stage_state.h).
  auto per_replica = [](const std::string& mode) {
    const auto m = config::parse_choice<config::DpMode>(mode);
    return m && config::per_replica(*m);
  };
  const int replicas = per_replica(saved.dp_mode) ? saved.dp : 0;
  const bool mean = replicas > 0 && !(per_replica(run.dp_mode) && saved.dp == run.dp);
  const bool same =
      !mean && saved.same_layout(run) && own && own->dp_rank == dp_rank && own->stages == mine;
  std::vector<size_t> files{static_cast<size_t>(world_.rank())};
  if (!same) files = files_to_read(saved, cut_, stages_, world_.rank(), dp_rank);
  fetch_missing(world_, saved, dir, files, "the resume stops before training");
  check_files_seen(world_, saved, dir, files);
  if (metrics_) metrics_->align(saved.step);
  // Per-replica state (quant's residual) belongs to a replica of the same dp only; the models
  // of a per-replica mode's replicas are all read when their mean is taken.
  const int64_t read_before = checkpoint_bytes_read();
  CheckpointReader reader(dir, saved, files, saved.dp == run.dp || replicas > 0, run.tp);
  // The files are checked as they are read: a rank that finds one damaged stops every rank.
  agreed_check(world_, [&] {
    for (const auto& [s, y] : syncs_)
      parallel::want_stage_state(*y, *optimizers_.at(s), reader.wanted(), saved.tp == run.tp);
    for (const auto& [s, y] : syncs_)
      parallel::load_stage_state(*y, *optimizers_.at(s), reader, replicas);
  });
  report_reads(saved, checkpoint_bytes_read() - read_before);
  if (same && reader.first_rng().defined()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    gen.set_state(reader.first_rng());
  }
  previous_ = saved.step;
  return saved.step;
}

}  // namespace loom::train

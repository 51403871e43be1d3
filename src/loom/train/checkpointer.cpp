#include "loom/train/checkpointer.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>

#include "loom/common/error.h"
#include "loom/parallel/data_parallel.h"
#include "loom/parallel/optimizer.h"
#include "loom/train/checkpoint.h"

namespace loom::train {
namespace fs = std::filesystem;

namespace {

std::string rank_file(int rank) {
  char file[32];
  std::snprintf(file, sizeof file, "rank-%05d.pt", rank);
  return file;
}

// ---- The data-parallel side of a checkpoint: the only calls into the modes and optimizers. ----
// Unsharded modes: the stage's parameters as "param.<name>"; every mode: its own state
// (shards, slim's global copy, quant's residual) as "sync.<stage>" and the stage optimizer's
// as "optimizer.<stage>".
void write_stage_state(torch::serialize::OutputArchive& ar, const Checkpointer::Stages& stages,
                       const Checkpointer::Syncs& syncs, const Checkpointer::Optimizers& opts) {
  for (auto& [s, st] : stages)
    if (!syncs.at(s)->saves_params())  // sharded modes write their shard in sync.<s>
      for (auto& p : st->params()) ar.write("param." + p.name, p.tensor.detach());
  for (auto& [s, y] : syncs) {
    torch::serialize::OutputArchive sub, opt;
    y->save(sub);
    ar.write("sync." + std::to_string(s), sub);
    opts.at(s)->save(opt);
    ar.write("optimizer." + std::to_string(s), opt);
  }
}

void read_stage_state(torch::serialize::InputArchive& ar, const Checkpointer::Stages& stages,
                      const Checkpointer::Syncs& syncs, const Checkpointer::Optimizers& opts) {
  torch::NoGradGuard ng;
  for (auto& [s, st] : stages) {
    if (syncs.at(s)->saves_params()) continue;  // restored by the mode from its shard
    for (auto& p : st->params()) {
      torch::Tensor t;
      ar.read("param." + p.name, t);
      p.tensor.copy_(t);
    }
  }
  for (auto& [s, y] : syncs) {
    torch::serialize::InputArchive sub, opt;
    ar.read("sync." + std::to_string(s), sub);
    y->load(sub);
    ar.read("optimizer." + std::to_string(s), opt);
    opts.at(s)->load(opt);
  }
}
// ---- end of the data-parallel side ----

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

// Keeps the newest `keep` complete checkpoints (rank 0, after `latest` points at the new one).
void prune(const fs::path& root, size_t keep) {
  std::vector<fs::path> complete;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (is_step_folder(e) && fs::exists(e.path() / "manifest.json", ec))
      complete.push_back(e.path());
  std::sort(complete.begin(), complete.end());  // step-NNNNNN: names sort by step
  for (size_t i = 0; i + keep < complete.size(); ++i) fs::remove_all(complete[i], ec);
}

}  // namespace

void clear_run_folder(const std::string& dir) {
  std::error_code ec;  // ranks sharing a file system race to remove the same files
  fs::remove_all(fs::path(dir) / "checkpoint", ec);
  fs::remove(fs::path(dir) / "metrics.jsonl", ec);
}

Checkpointer::Checkpointer(const config::Config& cfg, const Resolved& r, comm::Backend& world,
                           const Stages& stages, const Syncs& syncs, const Optimizers& optimizers)
    : cfg_(cfg), r_(r), world_(world), stages_(stages), syncs_(syncs), optimizers_(optimizers) {
  remove_debris(fs::path(cfg_.output.dir) / "checkpoint", world_.rank() == 0);
}

std::string Checkpointer::save(int64_t steps_done) {
  const fs::path root = fs::path(cfg_.output.dir) / "checkpoint";
  const std::string name = step_name(steps_done);
  const fs::path dir = root / name;
  const std::string file = (dir / rank_file(world_.rank())).string();
  // Serialized in memory first: the bytes written are the bytes checksummed, and a failing
  // disk is reported by the system call that failed (ENOSPC, EIO), naming the file.
  int64_t mine[2] = {0, 0};  // bytes (-1: this rank failed), crc32
  std::string failure;
  try {
    std::error_code ec;
    fs::create_directories(dir, ec);  // every rank: nodes need not share a file system
    if (ec) throw Error("cannot create '" + dir.string() + "': " + ec.message());
    torch::serialize::OutputArchive ar;
    write_stage_state(ar, stages_, syncs_, optimizers_);
    ar.write("rng", torch::Tensor(at::detail::getDefaultCPUGenerator().get_state()));
    std::ostringstream buf;
    ar.save_to(buf);
    const std::string bytes = std::move(buf).str();
    write_file_atomic(file, bytes);
    mine[0] = static_cast<int64_t>(bytes.size());
    mine[1] = crc32_of(bytes);
  } catch (const Error& e) {
    failure = e.what();
    mine[0] = -1;
    std::error_code ec;
    fs::remove(dir, ec);  // only if empty: the folder of a checkpoint that will not exist
  }
  std::vector<int64_t> all(2 * world_.size());
  world_.all_gather(mine, all.data(), 2, comm::DType::Int64)->wait();
  for (int q = 0; q < world_.size(); ++q) {
    if (all[2 * q] >= 0) continue;
    const std::string kept = previous_ ? "step " + std::to_string(previous_) : "none";
    if (q == world_.rank())
      throw Error(detail::concat(failure, "; checkpoint ", name, " not written, the last one (",
                                 kept, ") is intact"));
    throw Error(detail::concat("rank ", q, " could not write its part of checkpoint ", name,
                               "; the last one (", kept, ") is intact"));
  }
  if (world_.rank() == 0) {
    Manifest m = describe_run(cfg_, r_, world_.size());
    m.step = steps_done;
    for (int q = 0; q < world_.size(); ++q)
      m.files.push_back({all[2 * q], static_cast<uint32_t>(all[2 * q + 1])});
    write_file_atomic((dir / "manifest.json").string(), manifest_to_json(m));
    write_file_atomic((root / "latest").string(), name + "\n");
    prune(root, static_cast<size_t>(cfg_.output.keep));
  }
  previous_ = steps_done;
  world_.barrier()->wait();
  return dir.string();
}

int64_t Checkpointer::load(const std::string& path) {
  std::string dir;
  const Manifest saved = read_manifest(path, &dir);
  check_resumable(saved, describe_run(cfg_, r_, world_.size()), dir);
  const fs::path f = fs::path(dir) / rank_file(world_.rank());
  if (!fs::exists(f))
    LOOM_USAGE("checkpoint file '", f.string(), "' is missing; the checkpoint is incomplete");
  const std::string bytes = read_file(f.string());
  const Manifest::File& want = saved.files.at(world_.rank());
  const uint32_t crc = crc32_of(bytes);
  if (static_cast<int64_t>(bytes.size()) != want.bytes || crc != want.crc32)
    LOOM_USAGE("checkpoint file '", f.string(), "' does not match its manifest (", bytes.size(),
               " bytes, CRC-32 ", crc, "; the manifest says ", want.bytes, " bytes, CRC-32 ",
               want.crc32, "): it is damaged or from another run; resume from another checkpoint");
  torch::serialize::InputArchive ar;
  ar.load_from(bytes.data(), bytes.size());
  read_stage_state(ar, stages_, syncs_, optimizers_);
  torch::Tensor rng;
  ar.read("rng", rng);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(rng);
  previous_ = saved.step;
  return saved.step;
}

}  // namespace loom::train

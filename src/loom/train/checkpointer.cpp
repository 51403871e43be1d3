#include "loom/train/checkpointer.h"

#include <filesystem>

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

}  // namespace

Checkpointer::Checkpointer(const config::Config& cfg, const Resolved& r, comm::Backend& world,
                           const Stages& stages, const Syncs& syncs, const Optimizers& optimizers)
    : cfg_(cfg), r_(r), world_(world), stages_(stages), syncs_(syncs), optimizers_(optimizers) {}

void Checkpointer::save(int64_t steps_done) {
  fs::path root = fs::path(cfg_.output.dir) / "checkpoint";
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(steps_done));
  fs::path dir = root / name;
  fs::create_directories(dir);  // every rank: nodes need not share a file system
  {
    torch::serialize::OutputArchive ar;
    write_stage_state(ar, stages_, syncs_, optimizers_);
    ar.write("rng", torch::Tensor(at::detail::getDefaultCPUGenerator().get_state()));
    const std::string file = rank_file(world_.rank());
    std::string tmp = (dir / (file + ".tmp")).string();
    ar.save_to(tmp);
    fs::rename(tmp, dir / file);
  }
  world_.barrier()->wait();
  if (world_.rank() == 0) {
    Manifest m{steps_done, world_.size(), r_.dp, r_.pp, r_.loops,
               config::name_of(cfg_.parallel.dp_mode), config::name_of(cfg_.model.kind),
               cfg_.parallel.schedule};
    write_file_atomic((dir / "manifest.json").string(), manifest_to_json(m));
    write_file_atomic((root / "latest").string(), std::string(name) + "\n");
    // Keep only the newest complete checkpoint.
    for (auto& e : fs::directory_iterator(root))
      if (e.is_directory() && e.path().filename() != name &&
          e.path().filename().string().rfind("step-", 0) == 0)
        fs::remove_all(e.path());
  }
  world_.barrier()->wait();
}

int64_t Checkpointer::load(const std::string& path) {
  std::string dir;
  Manifest m = read_manifest(path, &dir);
  if (m.world != world_.size() || m.dp != r_.dp || m.pp != r_.pp || m.loops != r_.loops ||
      m.dp_mode != config::name_of(cfg_.parallel.dp_mode) ||
      m.model_kind != config::name_of(cfg_.model.kind))
    LOOM_USAGE("checkpoint '", dir, "' was written with world=", m.world, " dp=", m.dp, " pp=",
               m.pp, " loops=", m.loops, " dp_mode=", m.dp_mode, " model=", m.model_kind,
               "; resume with the same settings");
  fs::path f = fs::path(dir) / rank_file(world_.rank());
  if (!fs::exists(f)) LOOM_USAGE("checkpoint file '", f.string(), "' is missing; the checkpoint is incomplete");
  torch::serialize::InputArchive ar;
  ar.load_from(f.string());
  read_stage_state(ar, stages_, syncs_, optimizers_);
  torch::Tensor rng;
  ar.read("rng", rng);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(rng);
  return m.step;
}

}  // namespace loom::train

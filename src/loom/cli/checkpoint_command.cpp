// loom checkpoint info|convert|gather: what a checkpoint holds, one consolidated file from it,
// and its files gathered onto one host from hosts whose run folders are their own.
#include <cstdio>
#include <iostream>
#include <set>

#include "loom/cli/commands.h"
#include "loom/comm/rank_hosts.h"
#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/flags/flags.h"
#include "loom/launch/placement.h"
#include "loom/train/checkpoint_hosts.h"
#include "loom/train/consolidate.h"

namespace loom::cli {
namespace {

const char* kUsage =
    "usage: loom checkpoint info DIR [--tensors]\n"
    "       loom checkpoint convert DIR --out OUT\n"
    "       loom launch --nproc 1 --nnodes H --node-rank K --master-addr A -- \\\n"
    "         loom checkpoint gather DIR      (one process on each host)\n\n"
    "DIR: a checkpoint step folder, or a run's checkpoint folder or the run's folder (its\n"
    "     newest checkpoint, as `latest` says).\n"
    "info     checks every file against the manifest and prints what the checkpoint holds:\n"
    "         step, layout, model, optimizer, partition, files, parameters (--tensors: every\n"
    "         tensor with its shape).\n"
    "convert  writes OUT/consolidated.pt (every tensor whole) and OUT/manifest.json; any\n"
    "         layout resumes from it (loom train --resume OUT).\n"
    "gather   for runs on hosts whose run folders are their own (node-local disks): fetches\n"
    "         into DIR on the first host (rank 0's) every file of the checkpoint it lacks from\n"
    "         the hosts that hold them, checked on arrival, so that info, convert and\n"
    "         `loom export` read it there. One process on each host, under `loom launch` or\n"
    "         `mpirun -N 1`; each host's DIR is the same path on its own disk.\n";

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int info(const std::string& dir, bool tensors) {
  const train::CheckpointContents c = train::read_whole_checkpoint(dir);
  const train::Manifest& m = c.manifest;
  int64_t bytes = 0, params = 0, param_tensors = 0;
  for (const auto& f : m.files) bytes += f.bytes;
  std::set<int> replicas;
  for (const auto& [key, t] : c.tensors) {
    if (key.second >= 0) replicas.insert(key.second);
    if (key.first.rfind("param/", 0) == 0 && key.second <= 0) {
      params += t.data.numel();
      ++param_tensors;
    }
  }
  std::string partition;
  for (size_t s = 0; s < m.first.size(); ++s)
    partition += detail::concat(s ? " " : "", "[", m.first[s], ",",
                                s + 1 < m.first.size() ? m.first[s + 1] : m.blocks, ")");
  const auto& md = m.model;
  std::cout << "checkpoint " << c.dir << "\n"
            << "  step        " << m.step << " (loom " << m.loom_version << ")\n"
            << "  layout      " << m.layout() << ", schedule " << m.schedule << ", " << m.world
            << " ranks\n"
            << "  model       " << config::name_of(md.kind) << ": layers " << md.layers
            << ", width " << md.width << ", heads " << md.heads << ", seq_len " << md.seq_len
            << ", vocab " << md.vocab << ", classes " << md.classes << "\n"
            << "  partition   " << m.blocks << " blocks: " << partition << "\n"
            << "  optimizer   " << m.optimizer << ", " << m.dtype << "\n"
            << "  files       " << m.files.size() << ", " << bytes
            << " bytes, every one matches its size and CRC-32\n"
            << "  parameters  " << params << " in " << param_tensors << " tensors"
            << (replicas.empty() ? ""
                                 : detail::concat(" (per replica: ", replicas.size(), " replicas)"))
            << ", " << c.tensors.size() << " tensors in all\n";
  if (tensors)
    for (const auto& [key, t] : c.tensors)
      std::cout << "  " << key.first
                << (key.second >= 0 ? detail::concat(" (replica ", key.second, ")") : "") << " "
                << shape_text(t.shape) << "\n";
  return 0;
}

int gather(const std::string& path, int* argc, char*** argv) {
  if (!comm::launched_by_mpi() && !comm::launched_by_env())
    LOOM_USAGE("loom checkpoint gather runs one process on each host that holds part of the ",
               "checkpoint, and was started alone: loom launch --nproc 1 --nnodes H --node-rank K ",
               "--master-addr A -- loom checkpoint gather DIR on every host (or mpirun -N 1)");
  comm::init(comm::launch_backend(), argc, argv);
  comm::Backend& w = comm::world();
  if (w.size() > 1) comm::set_rank_hosts(launch::gather_hosts(w));
  const train::Gathered g = train::gather_checkpoint(w, path);
  if (w.rank() == 0) {
    const std::string rank0 = comm::hosts_of({0});  // "0 on node-a" where hosts are known
    std::cout << "checkpoint " << g.dir << " (step " << g.step << "): " << g.files
              << (g.files == 1 ? " file" : " files") << ", all in the folder of rank "
              << (rank0.empty() ? "0" : rank0) << "; " << g.fetched.files
              << " fetched from other hosts (" << g.fetched.bytes << " bytes)\n";
  }
  w.barrier()->wait();
  comm::finalize();
  return 0;
}

}  // namespace

int checkpoint_command(const std::vector<std::string>& args, int* argc, char*** argv) {
  const std::string sub = args.empty() ? "" : args[0];
  const bool has_dir = args.size() > 1 && args[1].rfind('-', 0) != 0;
  const std::vector<std::string> rest(args.begin() + std::min<size_t>(args.size(), has_dir ? 2 : 1),
                                      args.end());
  const flags::Parsed a =
      flags::parse(rest, {"checkpoint " + sub, {{"tensors", ""}, {"out", "consolidated"}}});
  if (a.help || sub == "--help" || sub == "-h") {
    std::cout << kUsage;
    return 0;
  }
  if (sub != "info" && sub != "convert" && sub != "gather")
    LOOM_USAGE("loom checkpoint needs info, convert or gather, got '", sub,
               "'; see loom checkpoint --help");
  if (!has_dir)
    LOOM_USAGE("loom checkpoint ", sub, " needs the checkpoint folder: loom checkpoint ", sub,
               " DIR", sub == "convert" ? " --out OUT" : "");
  if (sub == "info") return info(args[1], a.has("tensors"));
  if (sub == "gather") return gather(args[1], argc, argv);
  if (!a.has("out"))
    LOOM_USAGE("loom checkpoint convert needs --out OUT (a new folder for the consolidated file)");
  const train::CheckpointContents c = train::read_whole_checkpoint(args[1]);
  train::write_consolidated(c, a.get("out"));
  std::cout << "wrote " << a.get("out") << "/consolidated.pt: step " << c.manifest.step << ", "
            << c.tensors.size() << " tensors (from " << c.manifest.files.size() << " files, "
            << c.manifest.layout() << ")\n";
  return 0;
}

}  // namespace loom::cli

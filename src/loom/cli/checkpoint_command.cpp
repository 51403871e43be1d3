// loom checkpoint info|convert: what a checkpoint holds, and one consolidated file from it.
#include <cstdio>
#include <iostream>
#include <set>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/flags/flags.h"
#include "loom/train/consolidate.h"

namespace loom::cli {
namespace {

const char* kUsage =
    "usage: loom checkpoint info DIR [--tensors]\n"
    "       loom checkpoint convert DIR --out OUT\n\n"
    "DIR: a checkpoint step folder, or a run's checkpoint folder or the run's folder (its\n"
    "     newest checkpoint, as `latest` says).\n"
    "info     checks every file against the manifest and prints what the checkpoint holds:\n"
    "         step, layout, model, optimizer, partition, files, parameters (--tensors: every\n"
    "         tensor with its shape).\n"
    "convert  writes OUT/consolidated.pt (every tensor whole) and OUT/manifest.json; any\n"
    "         layout resumes from it (loom train --resume OUT).\n";

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

}  // namespace

int checkpoint_command(const std::vector<std::string>& args) {
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
  if (sub != "info" && sub != "convert")
    LOOM_USAGE("loom checkpoint needs info or convert, got '", sub,
               "'; see loom checkpoint --help");
  if (!has_dir)
    LOOM_USAGE("loom checkpoint ", sub, " needs the checkpoint folder: loom checkpoint ", sub,
               " DIR", sub == "convert" ? " --out OUT" : "");
  if (sub == "info") return info(args[1], a.has("tensors"));
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

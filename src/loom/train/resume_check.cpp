#include "loom/train/resume_check.h"

#include "loom/train/checkpoint.h"

namespace loom::train {

void check_resume_target(const config::Config& cfg, const Resolved& r, int world) {
  if (cfg.output.resume.empty()) return;
  std::string dir;
  const Manifest saved = read_manifest(cfg.output.resume, &dir);
  check_resumable(saved, describe_run(cfg, r, world), dir);
}

}  // namespace loom::train

#include "loom/train/resume_check.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "loom/common/error.h"
#include "loom/train/checkpoint.h"

namespace loom::train {

void check_resume_target(const config::Config& cfg, const Resolved& r, int world) {
  if (cfg.output.resume.empty()) return;
  std::string dir;
  const Manifest saved = read_manifest(cfg.output.resume, &dir, /*quiet=*/true);
  check_resumable(saved, describe_run(cfg, r, world), dir);
  for (size_t i = 0; i < saved.files.size(); ++i) check_file_size(saved, dir, i);
}

namespace {

std::string checkpoint_root(const config::Config& cfg) {
  return (std::filesystem::path(cfg.output.dir) / "checkpoint").string();
}

}  // namespace

std::string job_checkpoint(const config::Config& cfg, double since) {
  std::string dir;
  try {
    read_manifest(checkpoint_root(cfg), &dir, /*quiet=*/true);
  } catch (const UsageError&) {  // no complete checkpoint
    return "";
  }
  struct stat st = {};
  const std::string manifest = (std::filesystem::path(dir) / "manifest.json").string();
  if (::stat(manifest.c_str(), &st) != 0 ||
      double(st.st_mtim.tv_sec) + 1e-9 * double(st.st_mtim.tv_nsec) < since)
    return "";
  return std::filesystem::path(dir).filename().string();
}

std::string resume_after_restart(config::Config& cfg) {
  const char* count = std::getenv("LOOM_RESTART_COUNT");
  const char* start = std::getenv("LOOM_JOB_START");
  if (!count || std::atoi(count) <= 0 || !start || !*start || !cfg.output.resume.empty()) return "";
  std::string from = job_checkpoint(cfg, std::atof(start));
  if (from.empty()) {
    cfg.output.overwrite = true;  // the failed attempt's metrics, from the start again
    return "the start";
  }
  cfg.output.resume = checkpoint_root(cfg);
  return from;
}

}  // namespace loom::train

#include "loom/train/resume_check.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "loom/common/error.h"
#include "loom/train/checkpoint.h"

namespace loom::train {

void check_resume_target(const config::Config& cfg, const Resolved& r, int world) {
  if (cfg.output.resume.empty()) return;
  std::string dir;
  const Manifest run = describe_run(cfg, r, world);
  const Manifest saved = read_manifest(cfg.output.resume, &dir, /*quiet=*/true);
  check_resumable(saved, run, dir);
  check_steps_left(saved.step, cfg.train.steps, dir);
  try {
    for (size_t i = 0; i < saved.files.size(); ++i) check_file_size(saved, dir, i);
  } catch (const DamagedCheckpoint&) {
    // The ranks go back past a damaged checkpoint to the newest complete one before it
    // (Checkpointer::load, which says so): let them when one of those is whole by its sizes.
    for (std::string older = checkpoint_before(cfg.output.resume, dir); !older.empty();
         older = checkpoint_before(cfg.output.resume, older)) {
      const Manifest m = read_manifest(older, nullptr, /*quiet=*/true);
      check_resumable(m, run, older);
      try {
        for (size_t i = 0; i < m.files.size(); ++i) check_file_size(m, older, i);
        return;
      } catch (const DamagedCheckpoint&) {
      }
    }
    throw;
  }
}

namespace {

// Settings that do not change where the parameters go: the layout and how it runs (a resume
// under another layout continues the same run, to rounding), evaluation, output.
bool layout_or_output(const std::string& key) {
  static const std::set<std::string> keys = {"train.microbatches",
                                             "train.eval_every",
                                             "train.eval_batches",
                                             "train.final_eval",
                                             "train.threads",
                                             "train.device",
                                             "train.cpu_gemm",
                                             "parallel.dp",
                                             "parallel.pp",
                                             "parallel.tp",
                                             "parallel.sequence_parallel",
                                             "parallel.loops",
                                             "parallel.schedule",
                                             "parallel.schedule_file",
                                             "parallel.partition",
                                             "parallel.comm",
                                             "parallel.bucket_mib",
                                             "parallel.reshard_after_forward",
                                             "parallel.max_unsharded",
                                             "parallel.recompute",
                                             "parallel.placement"};
  return keys.count(key) || key.rfind("output.", 0) == 0 || key.rfind("emulate.", 0) == 0;
}

// A dp-mode's own section counts only when one of the two runs used that mode.
bool unused_mode_section(const std::string& key, const config::Config& a, const config::Config& b) {
  const std::string section = key.substr(0, key.find('.'));
  auto uses = [&](const config::Config& c) {
    const std::string mode = config::name_of(c.parallel.dp_mode);
    return mode == section || (section == "diloco" && mode == "streaming-diloco");
  };
  const bool mode_section =
      section == "slim" || section == "quant" || section == "diloco" || section == "powersgd";
  return mode_section && !uses(a) && !uses(b);
}

std::string checkpoint_root(const config::Config& cfg) {
  return (std::filesystem::path(cfg.output.dir) / "checkpoint").string();
}

}  // namespace

std::string changed_course(const config::Config& was, const config::Config& now) {
  const auto before = config::settings(was), after = config::settings(now);
  std::string out;
  for (size_t i = 0; i < after.size(); ++i) {  // the same fields in the same order
    const auto& [key, value] = after[i];
    if (before[i].second == value || layout_or_output(key) || unused_mode_section(key, was, now))
      continue;
    out += (out.empty() ? "" : ", ") + key + " " + before[i].second + " -> " + value;
  }
  return out;
}

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
  if (!count || std::atoi(count) <= 0 || !start || !*start) return "";
  std::string from = job_checkpoint(cfg, std::atof(start));
  if (!from.empty()) {
    cfg.output.resume = checkpoint_root(cfg);
    return from;
  }
  // Again from where the job began (the start, or the checkpoint it resumed), over the failed
  // attempt's output (a checkpoint of the run folder's own is not removed: resumes_own_folder).
  cfg.output.overwrite = true;
  return cfg.output.resume.empty() ? "the start" : cfg.output.resume;
}

void resume_with_the_others(config::Config& cfg) {
  cfg.output.resume = checkpoint_root(cfg);
  cfg.output.overwrite = false;
}

}  // namespace loom::train

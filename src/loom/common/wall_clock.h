#pragma once
// Seconds since the epoch by the wall clock: the clock of a job's start (LOOM_JOB_START, set by
// the launcher) and of the files a restarted job compares with it (train/resume_check.h).
#include <chrono>

namespace loom {

inline double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace loom

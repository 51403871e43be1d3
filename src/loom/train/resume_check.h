#pragma once
// The --resume target, checked before any rank starts (loom train --nproc): it exists, has a
// manifest, and the run can continue it (check_resumable). The ranks check it again, with
// the files' sizes and checksums, when they load it (Checkpointer::load). And where a
// restarted attempt of a job goes on from.
#include <string>

#include "loom/config/config.h"
#include "loom/train/preflight.h"

namespace loom::train {

// Does nothing when output.resume is empty; otherwise throws UsageError with one line.
void check_resume_target(const config::Config& cfg, const Resolved& r, int world);

// What a resume changes in the run's course: the settings of `now` that differ from `was` (the
// run that wrote the checkpoint) among those that shape the parameters' path — model, data,
// optimizer, learning-rate schedule, steps, seed, precision, the dp-mode and its own settings —
// as "train.lr 0.001 -> 0.002, train.steps 20 -> 40"; "" when none. The layout (dp, pp, tp,
// loops, schedule, micro-batches, recomputation), the backend, evaluation and output do not
// count: a resume under another layout continues the same run.
std::string changed_course(const config::Config& was, const config::Config& now);

// The newest complete checkpoint under output.dir/checkpoint whose manifest was written at or
// after `since` (seconds since the epoch): its step folder's name ("step-00000040"), "" for
// none. Only a checkpoint of this job is a resume point, not an older run's in the same folder.
// (`since`: loom::epoch_seconds(), common/wall_clock.h.)
std::string job_checkpoint(const config::Config& cfg, double since);

// A restarted attempt of a job of several machines (the launcher sets LOOM_RESTART_COUNT > 0
// and LOOM_JOB_START, the job's start by node 0's clock): output.resume becomes the job's
// newest checkpoint, or, without one, output.overwrite lets the attempt begin again as the job
// did (afresh, or from the checkpoint it resumed) over the failed one's output. Returns where
// it goes on from ("step-00000040", "the start" or the job's --resume); "" when this is no
// such restart.
std::string resume_after_restart(config::Config& cfg);
// A restarted attempt on a rank whose host found no checkpoint of the job while other ranks'
// did (hosts whose run folders are their own: a host that lost its disk, or one whose manifest
// lags): it resumes with them from its run's checkpoint folder (the resume agrees on the newest
// manifest and fetches what the host lacks: train/host_copies.h) instead of starting afresh.
void resume_with_the_others(config::Config& cfg);

}  // namespace loom::train

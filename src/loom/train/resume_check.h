#pragma once
// The --resume target, checked before any rank starts (loom train --nproc): it exists, has a
// manifest, and the run can continue it (check_resumable). The ranks check it again, with
// the files' sizes and checksums, when they load it (Checkpointer::load).
#include "loom/config/config.h"
#include "loom/train/preflight.h"

namespace loom::train {

// Does nothing when output.resume is empty; otherwise throws UsageError with one line.
void check_resume_target(const config::Config& cfg, const Resolved& r, int world);

}  // namespace loom::train

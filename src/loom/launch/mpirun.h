#pragma once
// `mpirun -n N COMMAND` as a child of this process (not exec'd), so that loom train --nproc can
// restart a failed job. SIGTERM/SIGINT to this process go straight to the ranks (mpirun's
// children), once: signalled itself, mpirun would SIGKILL them after odls_base_sigkill_timeout
// (1 s), too soon for a checkpoint, and sleep through that time in full. A second signal, or
// the end of Options::stop_grace_s, kills them. The ranks get LOOM_RESTART_COUNT.
#include <string>
#include <vector>

#include "loom/launch/launcher.h"

namespace loom::launch {

// Uses nproc, command, attempt and stop_grace_s of `o`.
Outcome run_mpirun(const Options& o);

// mpirun's options placing `nproc` ranks on a machine where this process may use `cpus` CPUs:
// each rank bound to an equal share of them, or to none when they are fewer than the ranks.
// (Open MPI binds one or two ranks to one core each by default, which confines a rank's
// intra-op threads and its helper threads, a background checkpoint writer, to that core however
// many the machine has.)
std::vector<std::string> binding_options(int nproc, int cpus);

}  // namespace loom::launch

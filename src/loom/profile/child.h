#pragma once
// Internal to loom_profile: runs another program (mpirun, or this executable) and waits.
#include <string>
#include <vector>

namespace loom::profile {

// Runs `cmd` (looked up on PATH unless it names a path) with one compute thread per process
// (OMP_NUM_THREADS=1), its output discarded when `quiet`, and waits for it. True when it
// exited with code 0.
bool run_child(std::vector<std::string> cmd, bool quiet = false);

}  // namespace loom::profile

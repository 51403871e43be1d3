#pragma once
// One run per output folder. A second `loom train` in the folder of a live run would truncate
// its metrics.jsonl and delete its checkpoints under it (--overwrite), or interleave its own
// with them; it is refused instead, naming the run that holds the folder.
#include <string>

namespace loom::train {

// Takes `<dir>/.loom-lock` (flock) for the rest of this process, writing who holds it ("pid 12
// on host h since 2026-12-03 10:37:02 UTC"). UsageError naming the holder when another process
// has it. The launcher of `loom train --nproc N` takes it for its ranks and says so to them in
// LOOM_OUTPUT_LOCKED; a file system without locks (some network ones) is run without.
// `made`: this process made the folder; if it holds nothing but the lock when the process
// exits (the ranks refused the run), folder and lock are removed: no debris of a failed start.
void lock_output_folder(const std::string& dir, bool made = false);
// That removal (at exit, and at once before an exit that skips the exit handlers: std::_Exit).
void remove_unused_output_folder();

}  // namespace loom::train

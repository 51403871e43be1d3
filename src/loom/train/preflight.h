#pragma once
// Everything about a run that can be checked before any rank starts: the configuration, the
// mesh against the world size, batch divisibility, the model cut, the schedule, the data files
// and the output folder. The CLI runs it before launching mpirun (so bad input costs one line
// and exit code 2, not a crash of N ranks); every rank runs it again at start.
#include <string>

#include "loom/config/config.h"
#include "loom/schedule/schedule.h"

namespace loom::train {

struct Resolved {
  int dp = 1, pp = 1, tp = 1, loops = 1, m = 1;
  int64_t micro_batch = 1;  // samples per micro-batch
  // Of the stages on the pipeline ranks: the schedule's (zbv: V), or the schedule file's header.
  schedule::Placement placement = schedule::Placement::Looping;
  schedule::Shape shape() const { return {pp, loops, m, placement}; }
};

// Throws loom::UsageError with one line naming the problem and the fix. check_output: then
// prepare_output_dir too.
Resolved preflight(const config::Config& cfg, int world_size, bool check_output = true);

// The output folder, made and checked last, once the rest of the input passed: refused if it
// holds another run (without --overwrite, and without --resume of a checkpoint in it), is not
// writable, or a live run holds it (run_lock.h); this process holds it from here on.
void prepare_output_dir(const config::OutputConfig& o);

// output.resume names output.dir, its checkpoint folder or a step folder in it: the run
// continues its own folder (its metrics and checkpoints go on). Otherwise a resume starts a new
// run folder from another's checkpoint.
bool resumes_own_folder(const config::OutputConfig& o);

// Default data location for a data kind when data.path is empty.
std::string default_data_path(const config::Config& cfg);

}  // namespace loom::train

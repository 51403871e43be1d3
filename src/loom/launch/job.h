#pragma once
// A job of attempts (`loom launch`, `--max-restarts K`): run_once again after a failure,
// until an attempt ends well, a rank's input is bad (exit 2), the job is stopped
// (SIGTERM/SIGINT), or K restarts are spent. Every attempt's ranks get LOOM_RESTART_COUNT and
// LOOM_JOB_START, from which a restarted `loom train` goes on from the job's newest checkpoint
// (train/resume_check.h).
//
// Across nodes the attempts are agreed through the store node 0's launcher hosts for the
// whole job. Node 0 opens attempt r; every node says it is ready for r; once all are, node 0
// lets them start (attempt 0 starts at once, the ranks meeting as they come). After a
// failure every node stops its ranks and waits for the next attempt. A node whose link was
// cut reconnects when the link is back; a lost host, once it is back, is given the same
// `loom launch` command again (by its scheduler, or by hand) and joins the attempt being
// assembled. Node 0 waits at most join_timeout_s for every node, then ends the job naming
// the nodes missing. Node 0's own host cannot be replaced: it holds the store.
#include "loom/launch/launcher.h"

namespace loom::launch {

// The job's exit code: its last attempt's (launcher.h, run_once).
int run_job(const Options& o);

}  // namespace loom::launch

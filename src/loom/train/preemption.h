#pragma once
// Preemption: SIGTERM or SIGINT to a rank only sets a flag, taken by a thread of its own (never
// by a computing thread); at the end of every step the ranks agree, with one all-reduce (max),
// whether any of them was signalled, so that a signal to a single rank stops all of them after
// the same step. The trainer then
// checkpoints and returns; the rank exits with 128 + the signal (143 SIGTERM, 130 SIGINT).
// A second SIGINT (Ctrl-C twice) exits at once with 130. A rank that mpirun started for
// `loom train --nproc N` (LOOM_LAUNCHER_PID) stops the same way when that launcher dies.
namespace loom::comm {
class Backend;
}  // namespace loom::comm

namespace loom::train {

// Blocks the stop signals in this thread and the threads it starts later, starts the thread
// that takes them, and installs a handler for threads started earlier (idempotent). Call before
// the communication backend starts its threads, and again after it, in case it replaced the
// handler. (A process forked from this one inherits the blocked signals: unblock them before
// exec.)
void install_stop_handlers();
// Whether install_stop_handlers ran (the loom train ranks; not the in-process tests).
bool stop_handlers_installed();
// The signal this rank received, 0 for none.
int local_stop_signal();
// Collective over `world`: the largest signal any rank received, 0 for none.
int agree_stop_signal(comm::Backend& world);
// "SIGTERM", "SIGINT" or "signal N".
const char* stop_signal_name(int sig);

}  // namespace loom::train

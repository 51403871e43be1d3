#pragma once
// The calling thread's scheduler time slice, and the cores this process may use.
//
// Linux (EEVDF, kernel 6.6 and later) lets a waking thread preempt a running one only when its
// virtual deadline is earlier, and a deadline lies one slice after the thread is placed; a
// normal thread may ask for a slice from 0.1 to 100 ms (kernel 6.12 and later). A thread with
// a long slice that wakes often (a communication engine polling its requests) then waits for
// the next scheduling point instead of interrupting whoever computes.
#include <chrono>

namespace loom {

// Sets the calling thread's slice (0: the kernel's default). Best effort: false, and nothing
// changed, where the kernel does not support it or the thread is not a normal (SCHED_OTHER)
// one. Threads created afterwards by this thread inherit the slice.
bool set_thread_slice(std::chrono::microseconds slice);

// The calling thread's slice as the kernel reports it (0 when it does not say).
std::chrono::microseconds thread_slice();

// The cores this process may run on (its affinity mask); at least 1.
int usable_cores();

}  // namespace loom

#include "loom/train/preemption.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "loom/comm/backend.h"

namespace loom::train {
namespace {

volatile sig_atomic_t g_stop = 0;
bool g_installed = false;

void on_stop_signal(int sig) {
  if (g_stop == SIGINT && sig == SIGINT) _exit(128 + SIGINT);  // Ctrl-C twice: at once
  if (g_stop == 0 || sig > g_stop) g_stop = sig;
}

}  // namespace

void install_stop_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // blocking calls in the communication libraries go on
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  g_installed = true;
}

bool stop_handlers_installed() {
  return g_installed;
}

int local_stop_signal() {
  return g_stop;
}

int agree_stop_signal(comm::Backend& world) {
  int sig = g_stop;
  world.all_reduce(&sig, 1, comm::DType::Int32, comm::ReduceOp::Max)->wait();
  return sig;
}

const char* stop_signal_name(int sig) {
  if (sig == SIGTERM) return "SIGTERM";
  if (sig == SIGINT) return "SIGINT";
  static thread_local char buf[24];
  std::snprintf(buf, sizeof buf, "signal %d", sig);
  return buf;
}

}  // namespace loom::train

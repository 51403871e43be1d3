// core_speed: how steady each core's speed is. One thread per chosen core, pinned to it,
// runs a small in-cache matrix product back to back for S seconds and prints, for every
// window of 250 ms, its mean time over the fastest time that core ever showed (1.00 = full
// speed). Memory plays no part (the data fits in L1), so a window above 1 means the core
// itself ran slower: on a shared virtual machine, another tenant
// (docs/notes/planner-validation.md).
//
// usage: core_speed [--cores 0,1] [--seconds 10]
//   e.g. `core_speed --cores 0` and then `core_speed --cores 0,1`: whether core 0 slows down
//   because core 1 works too, or on its own. Exit 2 on bad arguments.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kN = 64;
constexpr double kWindowS = 0.25;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Trace {
  std::vector<double> window_mean;  // mean kernel time per window (s)
  double best = 1e30;
};

void run(int core, double total_s, Clock::time_point start, Trace* out) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    std::fprintf(stderr,
                 "core_speed: cannot run on core %d; choose among the cores this process may use\n",
                 core);
    std::exit(2);
  }
  std::vector<float> a(kN * kN), b(kN * kN, 0.5f), c(kN * kN, 0.f);
  for (int i = 0; i < kN * kN; ++i) a[i] = 1.0f / float(i + 1);
  double sum = 0;
  long count = 0;
  int window = 0;
  for (;;) {
    const auto t0 = Clock::now();
    if (seconds(start, t0) >= total_s) break;
    for (int i = 0; i < kN; ++i)
      for (int k = 0; k < kN; ++k) {
        const float x = a[i * kN + k];
        for (int j = 0; j < kN; ++j) c[i * kN + j] += x * b[k * kN + j];
      }
    asm volatile("" : : "r"(c.data()) : "memory");  // keep the product
    const auto t1 = Clock::now();
    const double d = seconds(t0, t1);
    out->best = std::min(out->best, d);
    if (int(seconds(start, t1) / kWindowS) != window) {
      if (count) out->window_mean.push_back(sum / count);
      sum = 0;
      count = 0;
      window = int(seconds(start, t1) / kWindowS);
      std::fill(c.begin(), c.end(), 0.f);
    }
    sum += d;
    ++count;
  }
}

[[noreturn]] void usage_error(const std::string& why) {
  std::fprintf(stderr, "core_speed: %s (usage: core_speed [--cores 0,1] [--seconds 10])\n",
               why.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> cores = {0};
  double total = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage_error("missing value after " + k);
    const std::string v = argv[++i];
    if (k == "--cores") {
      cores.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        long c = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || c < 0 || c >= CPU_SETSIZE)
          usage_error("--cores wants core numbers such as 0,1; got '" + v + "'");
        cores.push_back(int(c));
      }
    } else if (k == "--seconds") {
      char* end = nullptr;
      total = std::strtod(v.c_str(), &end);
      if (*end || total <= 0) usage_error("--seconds wants a number > 0, got '" + v + "'");
    } else {
      usage_error("unknown argument " + k);
    }
  }
  std::vector<Trace> traces(cores.size());
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (size_t i = 0; i < cores.size(); ++i)
    threads.emplace_back(run, cores[i], total, start, &traces[i]);
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < cores.size(); ++i) {
    const Trace& t = traces[i];
    int slow = 0;
    std::printf("core %d (fastest %.1f us), mean / fastest per %.0f ms window:", cores[i],
                t.best * 1e6, kWindowS * 1e3);
    for (double m : t.window_mean) {
      std::printf(" %.2f", m / t.best);
      slow += m / t.best > 1.3;
    }
    std::printf("\n  windows slower than 1.3x: %d of %zu\n", slow, t.window_mean.size());
  }
  return 0;
}

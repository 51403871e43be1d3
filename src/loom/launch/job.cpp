#include "loom/launch/job.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "loom/comm/node_store.h"
#include "loom/common/error.h"
#include "loom/common/wall_clock.h"
#include "loom/launch/node_watch.h"

namespace loom::launch {
namespace {

using Clock = std::chrono::steady_clock;

std::string now_epoch() {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", epoch_seconds());
  return buf;
}

// Keys of the job (the attempts' own under loom/a<r>/): start and restarts (node 0's
// settings), attempt (the one being assembled or run), end (the job's exit code, once node 0
// is done), left/<node> (a node has seen the end), a<r>/ready/<node>, a<r>/go, and
// a<r>/nodes/ (the watch's, node_watch.h).
const char* kStart = "loom/job/start";
const char* kRestarts = "loom/job/restarts";
const char* kAttempt = "loom/job/attempt";
const char* kEnd = "loom/job/end";
std::string left_key(int node) {
  return detail::concat("loom/job/left/", node);
}
std::string of_attempt(int r, const std::string& what) {
  return detail::concat("loom/a", r, "/", what);
}

// A failure another attempt may cure: not bad input, not a stop someone asked for.
bool restartable(const Outcome& out) {
  return out.code != 0 && out.code != 2 && !out.stopped && !out.final_elsewhere;
}

std::string who_failed(const Outcome& out) {
  if (out.failed_rank >= 0) return detail::concat("rank ", out.failed_rank, " ", out.why);
  return out.why.empty() ? detail::concat("exit code ", out.code) : out.why;
}

int run_single(Options a) {
  a.job_start = now_epoch();
  for (a.attempt = 0;; ++a.attempt) {
    const Outcome out = run_once(a);
    if (!restartable(out) || a.attempt >= a.max_restarts) return out.code;
    std::fprintf(stderr, "loom: attempt %d failed (%s); restart %d of %d\n", a.attempt,
                 who_failed(out).c_str(), a.attempt + 1, a.max_restarts);
  }
}

int run_node0(Options a) {
  auto store = std::make_shared<comm::NodeStore>(a.master_addr, a.master_port, true,
                                                 comm::default_timeout());
  a.job_start = now_epoch();
  store->set(kRestarts, std::to_string(a.max_restarts));
  store->set(kStart, a.job_start);
  for (a.attempt = 0;; ++a.attempt) {
    const int r = a.attempt;
    store->set(kAttempt, std::to_string(r));
    if (r > 0) {
      const auto deadline = Clock::now() + std::chrono::seconds(a.join_timeout_s);
      std::string missing;
      for (;;) {
        missing.clear();
        for (int j = 1; j < a.nnodes; ++j)
          if (!store->has(of_attempt(r, detail::concat("ready/", j))))
            missing += detail::concat(missing.empty() ? "" : ", ", "node ", j);
        if (missing.empty() || Clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      if (!missing.empty()) {
        std::fprintf(stderr,
                     "loom: %s did not come back within %d s (--join-timeout); the job ends, "
                     "%d attempt%s made\n",
                     missing.c_str(), a.join_timeout_s, r, r == 1 ? "" : "s");
        store->set(kEnd, "1");
        return 1;
      }
    }
    store->set(of_attempt(r, "go"), "1");
    const Outcome out = run_once(a, store, of_attempt(r, "nodes/"));
    if (!restartable(out) || r >= a.max_restarts) {
      store->set(kEnd, std::to_string(out.code));
      // A node waiting for another attempt learns of the end from the store: it stays up
      // until every node has left (at most 10 s; a node gone for good never says so).
      const auto until = Clock::now() + std::chrono::seconds(10);
      for (int j = 1; a.max_restarts > 0 && j < a.nnodes && Clock::now() < until;)
        if (store->has(left_key(j)))
          ++j;
        else
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return out.code;
    }
    std::fprintf(stderr,
                 "loom: attempt %d failed (%s); restart %d of %d: waiting up to %d s for every "
                 "node\n",
                 r, who_failed(out).c_str(), r + 1, a.max_restarts, a.join_timeout_s);
  }
}

// Node a.node_rank's part in joining the next attempt after `last` (-1: none yet): the attempt
// node 0 opened, once node 0 says go (a.job_start set), or none when the job has ended (its
// code in *end). Throws when the store fails or `deadline` passes.
std::optional<int> join_attempt(comm::NodeStore& store, Options& a, int last,
                                Clock::time_point deadline, int* end) {
  auto ended = [&] {
    if (!store.has(kEnd)) return false;
    *end = std::stoi(store.get(kEnd));
    store.set(left_key(a.node_rank), "1");
    return true;
  };
  int r = -1;
  for (;;) {
    if (store.has(kStart) && store.has(kRestarts) && store.has(kAttempt)) {
      const std::string k = store.get(kRestarts);
      if (k != std::to_string(a.max_restarts))
        throw UsageError(detail::concat("node 0 runs with --max-restarts ", k, ", this node with ",
                                        a.max_restarts, "; give every node the same"));
      if (ended()) return std::nullopt;
      r = std::stoi(store.get(kAttempt));
      if (r > last) break;
    }
    if (Clock::now() >= deadline) throw Error("no attempt to join");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  a.job_start = store.get(kStart);
  store.set(of_attempt(r, detail::concat("ready/", a.node_rank)), comm::host_name());
  while (!store.has(of_attempt(r, "go"))) {
    if (ended()) return std::nullopt;
    if (Clock::now() >= deadline) throw Error("attempt never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return r;
}

// Nodes 1..H-1: follow node 0's attempts.
int run_other(Options a) {
  const std::string at = detail::concat(a.master_addr, ":", a.master_port);
  // How long to keep trying to reach node 0's store: the communication timeout at the start
  // (as without restarts), the join timeout between attempts.
  auto deadline = Clock::now() + comm::default_timeout();
  int last = -1, code = 1;
  for (;;) {
    std::shared_ptr<comm::NodeStore> store;
    std::optional<int> r;
    int end = 1;
    try {
      // A new connection for every attempt: a cut link leaves the old one dead.
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      store = std::make_shared<comm::NodeStore>(a.master_addr, a.master_port, false,
                                                std::max(left, std::chrono::milliseconds(1000)));
      r = join_attempt(*store, a, last, deadline, &end);
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& e) {
      if (Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
      if (last < 0) throw;
      std::fprintf(stderr,
                   "loom: node 0's store at %s out of reach for %d s after attempt %d; giving up\n",
                   at.c_str(), a.join_timeout_s, last);
      return code;
    }
    if (!r) {  // node 0 ended the job
      if (last < 0)
        std::fprintf(stderr, "loom: the job at %s has ended (exit code %d)\n", at.c_str(), end);
      return last < 0 ? end : code;
    }
    a.attempt = *r;
    if (*r > 0) std::fprintf(stderr, "loom: node %d joins attempt %d\n", a.node_rank, *r);
    const Outcome out = run_once(a, store, of_attempt(*r, "nodes/"));
    last = *r;
    code = out.code;
    if (!restartable(out) || *r >= a.max_restarts) {
      try {  // node 0 need not wait for this node (its store may be out of reach)
        if (a.max_restarts > 0) store->set(left_key(a.node_rank), "1");
      } catch (const std::exception&) {
      }
      return out.code;
    }
    deadline = Clock::now() + std::chrono::seconds(a.join_timeout_s);
  }
}

}  // namespace

int run_job(const Options& o) {
  if (o.nnodes == 1) return run_single(o);
  return o.node_rank == 0 ? run_node0(o) : run_other(o);
}

}  // namespace loom::launch

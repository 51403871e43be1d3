#include "loom/launch/node_watch.h"

#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include "loom/common/error.h"

namespace loom::launch {

using Clock = std::chrono::steady_clock;

std::string ranks_of(int nproc, int node) {
  const int a = node * nproc, b = a + nproc - 1;
  return a == b ? detail::concat("rank ", a) : detail::concat("ranks ", a, "-", b);
}

struct NodeWatch::State {
  std::shared_ptr<comm::NodeStore> store;
  NodeInfo info;
  std::mutex m;
  std::string trouble;                // guarded by m
  std::string failure;                // to post; guarded by m
  int done_code = -1;                 // to post; guarded by m
  bool done_posted = false;           // guarded by m
  bool trouble_told = false;          // trouble() returned it; guarded by m
  std::vector<bool> gone, done;       // per node; guarded by m
  std::vector<std::string> gone_why;  // guarded by m
  Clock::time_point last_round = Clock::now();
  std::atomic<bool> quit{false};

  std::string key(const char* what, int node) const {
    return detail::concat("loom/nodes/", what, "/", node);
  }
  std::vector<std::string> hosts;  // by node, once known; guarded by m
  // "node 1 (h1, ranks 2-3)"; the caller holds m.
  std::string name_of(int node) const {
    const std::string& h = hosts[node];
    return detail::concat("node ", node, " (", h.empty() ? "?" : h, ", ",
                          ranks_of(info.nproc, node), ")");
  }
  // Node 0, whose store is out of reach; the caller holds m.
  std::string store_lost(const std::string& why) const {
    return detail::concat(name_of(0), " unreachable: its store at ", info.master, " ", why);
  }

  void run() {
    const int me = info.node_rank;
    std::vector<int64_t> beats(info.nnodes, 0);
    std::vector<Clock::time_point> seen(info.nnodes, Clock::now());
    const auto start = Clock::now();
    bool posted = false;
    while (!quit) {
      try {
        store->add(key("beat", me), 1);
        std::string fail;
        int code = -1;
        {
          std::lock_guard<std::mutex> l(m);
          fail = posted ? "" : failure;
          code = done_posted ? -1 : done_code;
        }
        // The first failure wins; the others would only repeat what it caused.
        if (!fail.empty()) {
          if (store->add("loom/nodes/failures", 1) == 1) store->set("loom/nodes/failure", fail);
          posted = true;
        }
        if (code >= 0) {
          store->set(key("done", me), std::to_string(code));
          std::lock_guard<std::mutex> l(m);
          done_posted = true;
        }
        for (int j = 0; j < info.nnodes; ++j) {
          bool known = false;
          {
            std::lock_guard<std::mutex> l(m);
            known = !hosts[j].empty();
          }
          if (known || !store->has(key("host", j))) continue;
          const std::string h = store->get(key("host", j));
          std::lock_guard<std::mutex> l(m);
          hosts[j] = h;
        }
        std::string why;
        if (!posted && store->has("loom/nodes/failure")) why = store->get("loom/nodes/failure");
        for (int j = 0; j < info.nnodes; ++j) {
          if (j == me || gone[j] || done[j]) continue;
          if (store->has(key("done", j))) {
            std::lock_guard<std::mutex> l(m);
            done[j] = true;
            continue;
          }
          const int64_t b = store->add(key("beat", j), 0);
          const auto now = Clock::now();
          if (b != beats[j]) {
            beats[j] = b;
            seen[j] = now;
            continue;
          }
          const auto quiet = b == 0 ? now - start : now - seen[j];
          if (quiet < (b == 0 ? info.join : info.liveness)) continue;
          std::lock_guard<std::mutex> l(m);
          const std::string what = detail::concat(
              name_of(j), b == 0 ? " never joined" : " unreachable: no heartbeat for ",
              b == 0
                  ? ""
                  : std::to_string(std::chrono::duration_cast<std::chrono::seconds>(quiet).count()),
              b == 0 ? "" : " s");
          gone[j] = true;
          gone_why[j] = what;
          if (failure.empty()) failure = what;
          if (why.empty()) why = what;
        }
        std::lock_guard<std::mutex> l(m);
        if (trouble.empty() && !why.empty()) trouble = why;
        last_round = Clock::now();
      } catch (const std::exception& e) {
        std::string w = e.what();
        if (auto nl = w.find('\n'); nl != std::string::npos) w.resize(nl);
        std::lock_guard<std::mutex> l(m);
        if (trouble.empty()) trouble = store_lost("failed: " + w);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
};

NodeWatch::NodeWatch(std::shared_ptr<comm::NodeStore> store, NodeInfo info)
    : s_(std::make_shared<State>()) {
  s_->store = std::move(store);
  s_->info = std::move(info);
  s_->gone.assign(s_->info.nnodes, false);
  s_->done.assign(s_->info.nnodes, false);
  s_->gone_why.assign(s_->info.nnodes, "");
  s_->hosts.assign(s_->info.nnodes, "");
  s_->hosts[s_->info.node_rank] = s_->info.host;
  s_->store->set(s_->key("host", s_->info.node_rank), s_->info.host);
  thread_ = std::thread([s = s_] { s->run(); });
}

NodeWatch::~NodeWatch() {
  s_->quit = true;
  // A thread stuck on a dead link is left behind: the process is about to end.
  thread_.detach();
}

std::string NodeWatch::trouble() {
  std::lock_guard<std::mutex> l(s_->m);
  if (s_->trouble.empty() && Clock::now() - s_->last_round > s_->info.liveness)
    s_->trouble = s_->store_lost(
        detail::concat("gave no answer for ", s_->info.liveness.count() / 1000, " s"));
  s_->trouble_told |= !s_->trouble.empty();
  return s_->trouble;
}

void NodeWatch::post_failure(const std::string& what) {
  std::lock_guard<std::mutex> l(s_->m);
  if (s_->failure.empty()) s_->failure = what;
}

void NodeWatch::finish(int code) {
  {
    std::lock_guard<std::mutex> l(s_->m);
    s_->done_code = code;
  }
  const auto deadline = Clock::now() + 2 * s_->info.liveness;
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> l(s_->m);
      if (!s_->trouble.empty() && s_->trouble.find("store") != std::string::npos) return;
      bool all = s_->done_posted;
      // Node 0 keeps the store up until every node is done or gone.
      if (s_->info.node_rank == 0)
        for (int j = 1; j < s_->info.nnodes; ++j) all = all && (s_->done[j] || s_->gone[j]);
      if (all) {
        for (int j = 0; j < s_->info.nnodes; ++j)  // those not already told as the trouble
          if (s_->gone[j] && !(s_->trouble_told && s_->trouble == s_->gone_why[j]))
            std::fprintf(stderr, "loom: %s\n", s_->gone_why[j].c_str());
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace loom::launch

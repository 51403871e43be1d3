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

// Keys, under info.prefix (loom/nodes/): beat/K (node K's counter), host/K, done/K (its ranks' exit
// code), failures (how many were posted) and failure/I (the I-th, from 1).
struct NodeWatch::State {
  std::shared_ptr<comm::NodeStore> store;
  NodeInfo info;
  Clock::time_point last_round = Clock::now();
  std::atomic<bool> quit{false};
  // Everything below is guarded by m.
  std::mutex m;
  std::string trouble;
  bool trouble_told = false;          // trouble() returned it
  std::string to_post;                // this node's failure, until posted
  int64_t own = -1;                   // the index this node's failure got
  std::vector<std::string> failures;  // every one posted, in order
  int done_code = -1;                 // to post
  bool done_final = false;            // with it: no restart cures it
  bool done_posted = false;
  bool final_elsewhere = false;  // another node posted a final one
  std::vector<bool> gone, done;  // per node
  std::vector<std::string> gone_why, hosts;
  int64_t rounds = 0;  // completed

  std::string key(const char* what, int64_t i) const {
    return detail::concat(info.prefix, what, "/", i);
  }
  std::string failures_key() const { return info.prefix + "failures"; }
  // "node 1 (h1, ranks 2-3)".
  std::string name_of(int node) const {
    const std::string& h = hosts[node];
    return detail::concat("node ", node, " (", h.empty() ? "?" : h, ", ",
                          ranks_of(info.nproc, node), ")");
  }
  // Node 0, whose store is out of reach.
  std::string store_lost(const std::string& why) const {
    return detail::concat(name_of(0), " unreachable: its store at ", info.master, " ", why);
  }

  // One round of store calls; throws when the store is out of reach.
  void round(std::vector<int64_t>& beats, std::vector<Clock::time_point>& seen,
             Clock::time_point start) {
    const int me = info.node_rank;
    store->add(key("beat", me), 1);
    std::string post;
    int code = -1;
    bool final = false;
    {
      std::lock_guard<std::mutex> l(m);
      post = own < 0 ? to_post : "";
      code = done_posted ? -1 : done_code;
      final = done_final;
    }
    if (!post.empty()) {
      const int64_t i = store->add(failures_key(), 1);
      store->set(key("failure", i), post);
      std::lock_guard<std::mutex> l(m);
      own = i;
    }
    if (code >= 0) {
      store->set(key("done", me), std::to_string(code) + (final ? " final" : ""));
      std::lock_guard<std::mutex> l(m);
      done_posted = true;
    }
    for (int j = 0; j < info.nnodes; ++j) {
      {
        std::lock_guard<std::mutex> l(m);
        if (!hosts[j].empty()) continue;
      }
      if (!store->has(key("host", j))) continue;
      const std::string h = store->get(key("host", j));
      std::lock_guard<std::mutex> l(m);
      hosts[j] = h;
    }
    // New failures, in order; one whose text is not there yet waits for the next round.
    const int64_t posted = store->add(failures_key(), 0);
    for (int64_t i = static_cast<int64_t>(failures.size()) + 1; i <= posted; ++i) {
      if (!store->has(key("failure", i))) break;
      const std::string f = store->get(key("failure", i));
      std::lock_guard<std::mutex> l(m);
      failures.push_back(f);
    }
    for (int j = 0; j < info.nnodes; ++j) {
      if (j == me || gone[j] || done[j]) continue;
      if (store->has(key("done", j))) {
        const bool f = store->get(key("done", j)).find("final") != std::string::npos;
        std::lock_guard<std::mutex> l(m);
        done[j] = true;
        final_elsewhere = final_elsewhere || f;
        continue;
      }
      const int64_t b = store->add(key("beat", j), 0);
      const auto now = Clock::now();
      if (b != beats[j]) {
        beats[j] = b;
        seen[j] = now;
        continue;
      }
      const auto quiet = now - (b == 0 ? start : seen[j]);
      if (quiet < (b == 0 ? info.join : info.liveness)) continue;
      const auto s = std::chrono::duration_cast<std::chrono::seconds>(quiet).count();
      std::lock_guard<std::mutex> l(m);
      gone[j] = true;
      gone_why[j] = b == 0 ? detail::concat(name_of(j), " never joined in ", s, " s")
                           : detail::concat(name_of(j), " unreachable: no heartbeat for ", s, " s");
      if (to_post.empty()) to_post = gone_why[j];
      if (trouble.empty()) trouble = gone_why[j];
    }
    std::lock_guard<std::mutex> l(m);
    // Another node's failure stops this node, unless this node failed first by itself.
    if (trouble.empty() && to_post.empty() && !failures.empty()) trouble = failures.front();
    last_round = Clock::now();
    ++rounds;
  }

  void run() {
    std::vector<int64_t> beats(info.nnodes, 0);
    std::vector<Clock::time_point> seen(info.nnodes, Clock::now());
    const auto start = Clock::now();
    while (!quit) {
      try {
        round(beats, seen, start);
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
  const int n = s_->info.nnodes;
  s_->gone.assign(n, false);
  s_->done.assign(n, false);
  s_->gone_why.assign(n, "");
  s_->hosts.assign(n, "");
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
  if (s_->to_post.empty()) s_->to_post = what;
}

std::string NodeWatch::other_failures(std::chrono::milliseconds wait) {
  // A few rounds: the other nodes post within one of theirs after their rank fails.
  const auto deadline = Clock::now() + wait;
  while (Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::lock_guard<std::mutex> l(s_->m);
  std::string out;
  for (size_t i = 0; i < s_->failures.size(); ++i)
    if (static_cast<int64_t>(i) + 1 != s_->own && s_->failures[i] != s_->to_post)
      out += (out.empty() ? "" : "; ") + s_->failures[i];
  return out;
}

void NodeWatch::finish(int code, bool final) {
  {
    std::lock_guard<std::mutex> l(s_->m);
    s_->done_code = code;
    s_->done_final = final;
  }
  const auto deadline = Clock::now() + 2 * s_->info.liveness;
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> l(s_->m);
      if (!s_->trouble.empty() && s_->trouble.find("its store") != std::string::npos) return;
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

bool NodeWatch::final_elsewhere() {
  std::lock_guard<std::mutex> l(s_->m);
  return s_->final_elsewhere;
}

}  // namespace loom::launch

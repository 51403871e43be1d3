#include "loom/plan/blocking_exchanges.h"

#include <vector>

#include "loom/common/error.h"

namespace loom::plan {
namespace {

using schedule::Action;
using schedule::Kind;

// One compute action with the messages lowering put around it.
struct Unit {
  Action compute;
  std::vector<Action> recvs;  // its inputs (before it in the lowered list)
  std::vector<Action> sends;  // its outputs (after it)
  std::vector<Action> after;  // data-parallel actions that followed it
};

std::vector<Action> rewrite(const std::vector<Action>& list, bool pair) {
  std::vector<Action> head, pending;
  std::vector<Unit> units;
  for (const Action& a : list) {
    if (schedule::is_compute(a.kind)) {
      units.push_back({a, std::move(pending), {}, {}});
      pending.clear();
    } else if (a.kind == Kind::RECV_F || a.kind == Kind::RECV_B) {
      pending.push_back(a);
    } else if (a.kind == Kind::SEND_F || a.kind == Kind::SEND_B) {
      LOOM_CHECK(!units.empty() && units.back().compute.stage == a.stage &&
                     units.back().compute.microbatch == a.microbatch,
                 "lowered list sends ", schedule::to_string(a), " not after the compute making it");
      units.back().sends.push_back(a);
    } else {
      (units.empty() ? head : units.back().after).push_back(a);
    }
  }
  LOOM_CHECK(pending.empty(), "lowered list ends with a receive");

  // Steps: [first unit, end) ranges.
  std::vector<std::pair<size_t, size_t>> steps;
  for (size_t i = 0; i < units.size();) {
    const bool fb = pair && i + 1 < units.size() && units[i].compute.kind == Kind::F &&
                    units[i + 1].compute.kind == Kind::B;
    steps.push_back({i, i + (fb ? 2 : 1)});
    i = steps.back().second;
  }
  std::vector<Action> out = head;
  auto receives_of = [&](size_t k) {
    if (k >= steps.size()) return;
    for (size_t u = steps[k].first; u < steps[k].second; ++u)
      out.insert(out.end(), units[u].recvs.begin(), units[u].recvs.end());
  };
  receives_of(0);
  for (size_t k = 0; k < steps.size(); ++k) {
    for (size_t u = steps[k].first; u < steps[k].second; ++u) {
      out.push_back(units[u].compute);
      out.insert(out.end(), units[u].after.begin(), units[u].after.end());
    }
    for (size_t u = steps[k].first; u < steps[k].second; ++u)
      out.insert(out.end(), units[u].sends.begin(), units[u].sends.end());
    receives_of(k + 1);
  }
  return out;
}

}  // namespace

schedule::Schedule blocking_exchanges(const schedule::Schedule& lowered,
                                      bool pair_forward_backward) {
  schedule::Schedule out = lowered;
  for (auto& list : out.ranks) list = rewrite(list, pair_forward_backward);
  return out;
}

}  // namespace loom::plan

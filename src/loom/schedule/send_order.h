#pragma once
// The messages between two pipeline ranks are received in the order they are sent: NCCL pairs
// a pair's sends and receives in posting order (MPI and Gloo match tags and take any order).
// The executor posts a receive only after every receive its sender sends earlier, and the
// simulator, which mirrors it, does the same with its modelled buffers.
#include <algorithm>
#include <map>
#include <vector>

#include "loom/schedule/schedule.h"

namespace loom::schedule {

// peer -> the SEND_F / SEND_B actions of pipeline rank `peer` whose receiver is `rank`, in the
// peer's order.
inline std::map<int, std::vector<Action>> sends_to(const Schedule& s, int rank) {
  std::map<int, std::vector<Action>> out;
  for (int peer = 0; peer < static_cast<int>(s.ranks.size()); ++peer) {
    if (peer == rank) continue;
    for (const Action& a : s.ranks[peer])
      if ((a.kind == Kind::SEND_F || a.kind == Kind::SEND_B) &&
          s.shape.rank_of(a.kind == Kind::SEND_F ? a.stage + 1 : a.stage - 1) == rank)
        out[peer].push_back(a);
  }
  return out;
}

// Posts message `m` from one peer: first whatever `order` (what the peer sends here, in its
// order) lists before `m` that is not posted yet (`posted`: how many of `order` are), then `m`
// (also when `order` does not list it, or lists it as posted: `post` must take a repeat).
template <class Message, class Post>
void post_in_send_order(const std::vector<Message>& order, size_t& posted, const Message& m,
                        Post&& post) {
  if (std::find(order.begin() + posted, order.end(), m) != order.end())
    while (posted < order.size()) {
      const Message first = order[posted++];
      if (first == m) break;
      post(first);
    }
  post(m);
}

}  // namespace loom::schedule

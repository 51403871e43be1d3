#include "loom/plan/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "loom/common/error.h"
#include "loom/plan/core_sharing.h"
#include "loom/schedule/send_order.h"

namespace loom::plan {
namespace {

using schedule::Action;
using schedule::Kind;

// A change of one memory category at a point in time (frees sort before allocations).
struct MemEvent {
  double t;
  double delta;
  int category;  // 0 params, 1 grads, 2 kept activations, 3 working set
  int inflight;  // +1 / -1 for stored activations
};

struct RankState {
  size_t next = 0;
  double cursor = 0;                     // when the rank's program reaches its next action
  double dp_free = 0;                    // DP stream free
  std::map<int, double> link_free;       // send link to a peer pipeline rank
  std::map<int, double> gathered_ready;  // stage -> its last UNSHARD done
  std::map<int, double> gathered_since;  // stage -> its current UNSHARD start
  std::map<int, double> buffer_since;    // stage -> first backward start (grad buffer)
  std::map<std::pair<int, int>, double> act_since;    // (stage, mb) -> F start
  std::map<std::pair<int, int>, double> w_since;      // (stage, mb) -> I end (W's inputs kept)
  std::map<std::pair<int, int>, double> input_since;  // (stage, mb) -> F start (received input)
  std::vector<MemEvent> mem;
  size_t recv_posted = 0;               // actions whose receives are posted (loom's lookahead)
  std::map<int, size_t> posted_from;    // peer -> how many of its messages here are posted
  std::map<size_t, double> recv_since;  // message -> when its receive buffer was made
  double exchange_posted = -1;  // blocking p2p: when the current exchange was posted (-1: none)
  double exchange_end = 0;      // its latest completion so far
  std::vector<Action> deferred_reduce;    // grad_reduce_after_flush: REDUCE_GRADs of the list
  double tied_ready = -1, tied_end = -1;  // the tied embedding's all-reduce (-1: not yet known)
  bool optimized = false;                 // the optimizer step after the list has run
  double opt_start = 0, opt_end = 0;
};

class Sim {
 public:
  Sim(const schedule::Schedule& s, const CostModel& c, const SimOptions& o, bool record)
      : s_(s), c_(c), o_(o), record_(record) {
    const schedule::Shape& sh = s.shape;
    if (static_cast<int>(s.ranks.size()) != sh.pp)
      LOOM_USAGE("cannot simulate '", s.name, "': ", s.ranks.size(), " rank lists for pp=", sh.pp);
    if (c.stages() != sh.stages())
      LOOM_USAGE("cannot simulate '", s.name, "': the cost model has ", c.stages(),
                 " stages, the schedule ", sh.stages());
    if (o.mesh.pp != sh.pp)
      LOOM_USAGE("cannot simulate '", s.name, "': mesh pp=", o.mesh.pp, " but schedule pp=", sh.pp);
    arrival_.assign(size_t(sh.stages()) * sh.microbatches * 2, -1.0);
    posted_ = arrival_;
    st_.resize(sh.pp);
    sent_to_.resize(sh.pp);
    for (int r = 0; r < sh.pp; ++r)
      for (const auto& [peer, sends] : schedule::sends_to(s, r))
        for (const Action& a : sends) sent_to_[r][peer].push_back(message(a));
    out_.ranks.resize(sh.pp);
    out_.schedule_name = s.name;
    if (c.shared_cores() > 0)
      sharing_ = std::make_unique<CoreSharing>(c.shared_cores(), o.mesh.dp * o.mesh.tp, sh.pp,
                                               c.oversubscribed());
  }

  SimResult run() {
    const int pp = s_.shape.pp;
    for (;;) {
      bool progress = false, done = true;
      for (int r = 0; r < pp; ++r) {
        while (st_[r].next < s_.ranks[r].size() && step(r, s_.ranks[r][st_[r].next])) {
          ++st_[r].next;
          progress = true;
        }
        if (st_[r].next == s_.ranks[r].size() && !st_[r].optimized && optimize(r)) progress = true;
        done = done && st_[r].optimized;
      }
      if (done) break;
      // On shared cores, the next compute to finish lets some rank go on.
      if (!progress && sharing_ && sharing_->resolve()) continue;
      if (!progress) {
        std::string waits;
        for (int r = 0; r < pp; ++r)
          if (st_[r].next < s_.ranks[r].size())
            waits += detail::concat(waits.empty() ? "" : ", ", "rank ", r, " at ",
                                    schedule::to_string(s_.ranks[r][st_[r].next]));
        if (o_.blocking_p2p)
          LOOM_USAGE("cannot simulate '", s_.name, "' with blocking p2p: it deadlocks when each ",
                     "send waits for its receiver (", waits, "); drop --blocking-p2p (it models ",
                     "Megatron-LM's gpipe, 1f1b and interleaved schedules)");
        LOOM_USAGE("cannot simulate '", s_.name, "': deadlock (", waits,
                   "); validate the schedule with loom schedule --file");
      }
    }
    for (int r = 0; r < pp; ++r) finish(r);
    for (const RankResult& rr : out_.ranks) out_.step_s = std::max(out_.step_s, rr.end_s);
    return std::move(out_);
  }

  // Latest compute end over ranks (before the optimizer), and total busy compute.
  double compute_makespan() const { return compute_end_; }

 private:
  // A message, named by its receiving end: dir 0 the input of (stage, mb), 1 the gradient of
  // its output.
  size_t slot(int stage, int mb, int dir) const {
    return (size_t(stage) * s_.shape.microbatches + mb) * 2 + dir;
  }
  // The message a SEND or RECV action moves.
  size_t message(const Action& a) const {
    switch (a.kind) {
      case Kind::SEND_F: return slot(a.stage + 1, a.microbatch, 0);
      case Kind::SEND_B: return slot(a.stage - 1, a.microbatch, 1);
      case Kind::RECV_F: return slot(a.stage, a.microbatch, 0);
      default: return slot(a.stage, a.microbatch, 1);  // RECV_B
    }
  }
  double& arrival(int stage, int mb, int dir) { return arrival_[slot(stage, mb, dir)]; }
  int world(int pp_rank) const { return o_.mesh.rank(pp_rank, 0, 0); }

  void event(int r, const Action& a, Stream stream, double t0, double t1) {
    if (record_) {
      out_.ranks[r].events.push_back(
          {schedule::to_string(a), std::string(schedule::kind_name(a.kind)), stream, t0, t1});
    }
  }

  // loom's executor posts the receives of the next kRecvLookahead actions, each after every
  // receive its sender sends earlier: each buffer exists from then until the compute that takes
  // it (then it is that compute's input or gradient).
  void post_receives(int r) {
    RankState& st = st_[r];
    const std::vector<Action>& list = s_.ranks[r];
    for (; st.recv_posted < list.size() && st.recv_posted <= st.next + schedule::kRecvLookahead;
         ++st.recv_posted) {
      const Action& a = list[st.recv_posted];
      if (a.kind != Kind::RECV_F && a.kind != Kind::RECV_B) continue;
      // As the executor: after every receive its sender sends earlier (posted now too).
      const int from = s_.shape.rank_of(a.kind == Kind::RECV_F ? a.stage - 1 : a.stage + 1);
      schedule::post_in_send_order(sent_to_[r][from], st.posted_from[from], message(a),
                                   [&](size_t m) { st.recv_since.emplace(m, st.cursor); });
    }
  }
  void take_receive(int r, size_t msg, double t, double bytes) {
    RankState& st = st_[r];
    auto it = st.recv_since.find(msg);
    if (it == st.recv_since.end()) return;
    mem(r, it->second, t, bytes, 3);
    st.recv_since.erase(it);
  }

  // Advances rank r over action a; false when an input is not known yet.
  bool step(int r, const Action& a) {
    RankState& st = st_[r];
    if (!o_.blocking_p2p) post_receives(r);
    RankResult& rr = out_.ranks[r];
    const schedule::Shape& sh = s_.shape;
    const int s = a.stage, j = a.microbatch;
    switch (a.kind) {
      case Kind::F:
      case Kind::B:
      case Kind::I:
      case Kind::W: {
        double ready = st.cursor;
        if (a.kind == Kind::F && s > 0 && sh.rank_of(s - 1) != r) {
          if (arrival(s, j, 0) < 0) return false;
          ready = std::max(ready, arrival(s, j, 0));
        }
        if ((a.kind == Kind::B || a.kind == Kind::I) && s + 1 < sh.stages() &&
            sh.rank_of(s + 1) != r) {
          if (arrival(s, j, 1) < 0) return false;
          ready = std::max(ready, arrival(s, j, 1));
        }
        if (auto g = st.gathered_ready.find(s); g != st.gathered_ready.end())
          ready = std::max(ready, g->second);
        if (a.kind == Kind::F && s == sh.stages() - 1 && tied_copy_remote()) {
          if (tied_weight_arrival_ < 0) return false;
          ready = std::max(ready, tied_weight_arrival_);
        }
        double end = 0;
        if (!compute(r, ready, c_.compute_s(s, a.kind), c_.loaded_slowdown(s), &end)) return false;
        rr.compute_s += end - ready;
        rr.tp_comm_s += c_.compute_comm_s(s, a.kind);
        st.cursor = end;
        compute_end_ = std::max(compute_end_, end);
        event(r, a, Stream::Compute, ready, end);
        track_compute(r, a, ready, end);
        if (a.kind == Kind::F && s == 0 && tied_copy_remote() && tied_weight_arrival_ < 0)
          tied_weight_arrival_ = send_tied(r, sh.rank_of(sh.stages() - 1), end);
        return true;
      }
      case Kind::SEND_F:
      case Kind::SEND_B: {
        if (o_.blocking_p2p) return exchange(r, a);
        transfer(r, a, st.cursor);
        return true;
      }
      case Kind::RECV_F:
      case Kind::RECV_B: return o_.blocking_p2p ? exchange(r, a) : true;
      case Kind::UNSHARD: dp_collective(r, a); return true;
      case Kind::REDUCE_GRAD:
        // A tied head's copy: stage 0's reduction waits for the copy's gradient.
        if (o_.grad_reduce_after_flush || (s == 0 && c_.tied_copy_bytes() > 0))
          st.deferred_reduce.push_back(a);
        else
          dp_collective(r, a);
        return true;
      case Kind::RESHARD: {
        if (auto g = st.gathered_since.find(s); g != st.gathered_since.end()) {
          mem(r, g->second, st.cursor, c_.memory(s).gathered, 0);
          st.gathered_since.erase(g);
        }
        st.gathered_ready.erase(s);
        return true;
      }
    }
    return true;
  }

  // UNSHARD / REDUCE_GRAD: a collective on the data-parallel stream, issued at the cursor.
  void dp_collective(int r, const Action& a) {
    RankState& st = st_[r];
    RankResult& rr = out_.ranks[r];
    const int s = a.stage;
    const bool gather = a.kind == Kind::UNSHARD;
    const Collective op = gather ? Collective::AllGather : c_.reduce_collective(o_.dp_mode);
    const double bytes = gather ? c_.param_bytes(s) : c_.grad_bytes(s);
    if (bytes <= 0) return;  // slim, diloco: no gradient exchange
    const double t0 = std::max(st.cursor, st.dp_free);
    const double t1 = t0 + c_.collective_s(op, bytes, o_.mesh.dp_group(r));
    st.dp_free = t1;
    rr.dp_s += t1 - t0;
    rr.dp_bytes += ring_bytes(op, bytes);
    event(r, a, Stream::Dp, t0, t1);
    if (gather) {
      st.gathered_ready[s] = t1;
      st.gathered_since[s] = t0;
    } else if (auto b = st.buffer_since.find(s); b != st.buffer_since.end()) {
      mem(r, b->second, t1, c_.memory(s).grad_buffer, 1);
      st.buffer_since.erase(b);
    }
  }

  // SEND_F / SEND_B from `ready` on, once the link to the peer is free; returns the arrival.
  double transfer(int r, const Action& a, double ready) {
    const bool fwd = a.kind == Kind::SEND_F;
    const int boundary = fwd ? a.stage : a.stage - 1;  // between stages boundary and boundary + 1
    const int peer = s_.shape.rank_of(fwd ? a.stage + 1 : a.stage - 1);
    const double bytes = c_.boundary_bytes(boundary);
    double& link = st_[r].link_free[peer];
    const double t0 = std::max(ready, link);
    const double t1 = t0 + c_.p2p_s(bytes, world(r), world(peer));
    link = t1;
    arrival_[message(a)] = t1 + c_.receive_s(boundary);
    out_.ranks[r].p2p_s += t1 - t0;
    out_.ranks[r].p2p_bytes += bytes;
    event(r, a, Stream::Send, t0, t1);
    return t1;
  }

  // Blocking p2p: a run of consecutive SEND/RECV actions is one batched exchange. The rank
  // posts all its receives on reaching it; a transfer starts once both ends have posted (and
  // the link is free); the rank goes on when every transfer of the exchange has completed.
  bool exchange(int r, const Action& a) {
    RankState& st = st_[r];
    const std::vector<Action>& list = s_.ranks[r];
    if (st.exchange_posted < 0) {
      st.exchange_posted = st.exchange_end = st.cursor;
      for (size_t i = st.next; i < list.size() && schedule::is_p2p(list[i].kind); ++i) {
        const Kind k = list[i].kind;
        if (k == Kind::RECV_F || k == Kind::RECV_B) posted_[message(list[i])] = st.cursor;
      }
    }
    if (a.kind == Kind::SEND_F || a.kind == Kind::SEND_B) {
      const double peer_posted = posted_[message(a)];
      if (peer_posted < 0) return false;
      const double t1 = transfer(r, a, std::max(st.exchange_posted, peer_posted));
      st.exchange_end = std::max(st.exchange_end, t1);
    } else {
      const double t = arrival_[message(a)];
      if (t < 0) return false;
      st.exchange_end = std::max(st.exchange_end, t);
    }
    if (st.next + 1 == list.size() || !schedule::is_p2p(list[st.next + 1].kind)) {
      st.cursor = st.exchange_end;
      st.exchange_posted = -1;
    }
    return true;
  }

  // The end of `work_s` seconds of compute that can start at `start` on rank r: at once on a
  // device of its own; on shared cores once every rank's compute up to then is known (false
  // until then: the run loop resolves the sharing and calls again).
  bool compute(int r, double start, double work_s, double slowdown, double* end) {
    if (!sharing_) {
      *end = start + work_s;
      return true;
    }
    if (sharing_->take_finished(r, end)) return true;
    if (!sharing_->submitted(r)) sharing_->submit(r, start, work_s, slowdown);
    return false;
  }

  std::vector<int> stages_of(int r) const { return s_.shape.stages_of(r); }

  // The optimizer step once the rank's streams are idle; false while its end is not known.
  bool optimize(int r) {
    RankState& st = st_[r];
    if (!tied_copy_back(r)) return false;
    for (const Action& a : st.deferred_reduce) dp_collective(r, a);
    st.deferred_reduce.clear();
    double t = std::max(st.cursor, st.dp_free);
    for (const auto& [peer, free] : st.link_free) t = std::max(t, free);
    if (!tied_sync(r, &t)) return false;
    double work = 0, slowdown = 0;
    const std::vector<int> mine = stages_of(r);
    for (int s : mine) {
      work += c_.optimizer_s(s);
      slowdown += c_.loaded_slowdown(s) / double(mine.size());
    }
    double end = t;
    if (work > 0 && !compute(r, t, work, slowdown, &end)) return false;
    st.optimized = true;
    st.opt_start = t;
    st.opt_end = end;
    out_.ranks[r].optimizer_s = sharing_ ? end - t : work;
    return true;
  }

  // The tied embedding's gradient all-reduced between the first and the last stage's ranks
  // (CostModel::tied_grad_bytes), once both have reduced their gradients; moves *t to its end.
  // False while the other rank's start is not known.
  bool tied_sync(int r, double* t) {
    const double bytes = c_.tied_grad_bytes();
    const int first = s_.shape.rank_of(0), last = s_.shape.rank_of(s_.shape.stages() - 1);
    if (bytes <= 0 || first == last || (r != first && r != last)) return true;
    RankState& st = st_[r];
    if (st.tied_end >= 0) {  // called again (shared cores): done already
      *t = std::max(*t, st.tied_end);
      return true;
    }
    double t0 = 0;
    if (!tied_meet(r, r == first ? last : first, *t, &t0)) return false;
    const double t1 =
        t0 + c_.collective_s(Collective::AllReduce, bytes, {world(first), world(last)});
    RankResult& rr = out_.ranks[r];
    rr.dp_s += t1 - t0;
    rr.dp_bytes += bytes;  // a ring of two sends half twice
    if (record_)
      rr.events.push_back({"tied_embedding_ALL_REDUCE", "ALL_REDUCE", Stream::Dp, t0, t1});
    st.dp_free = st.tied_end = *t = t1;
    return true;
  }

  // The two ends of a tied head meet: rank r is ready at `ready` (its first call's); false
  // while the peer's readiness is not known, else *t0 = when both are.
  bool tied_meet(int r, int peer, double ready, double* t0) {
    if (st_[r].tied_ready < 0) st_[r].tied_ready = ready;
    if (st_[peer].tied_ready < 0) return false;
    *t0 = std::max(st_[r].tied_ready, st_[peer].tied_ready);
    return true;
  }

  // loom's tied head (CostModel::tied_copy_bytes) with its ends on two ranks.
  bool tied_copy_remote() const {
    const schedule::Shape& sh = s_.shape;
    return c_.tied_copy_bytes() > 0 && sh.rank_of(0) != sh.rank_of(sh.stages() - 1);
  }
  // The copy's weight or gradient sent by rank `from` at `t`; returns its arrival.
  double send_tied(int from, int to, double t) {
    const double bytes = c_.tied_copy_bytes();
    const double t1 = t + c_.p2p_s(bytes, from, to);
    out_.ranks[from].p2p_s += t1 - t;
    out_.ranks[from].p2p_bytes += bytes;
    return t1;
  }
  // Once both ranks' lists are done, the copy's gradient goes from the last stage's rank to the
  // first's (before its held reduction of stage 0); both wait for it, as the runtime does.
  // False while the other rank's end is not known.
  bool tied_copy_back(int r) {
    const schedule::Shape& sh = s_.shape;
    const int first = sh.rank_of(0), last = sh.rank_of(sh.stages() - 1);
    if (!tied_copy_remote() || (r != first && r != last)) return true;
    RankState& st = st_[r];
    if (st.tied_end >= 0) return true;  // called again (shared cores): done already
    double ready = st.cursor, t0 = 0;   // the rank's list and its sends are done
    for (const auto& [peer, free] : st.link_free) ready = std::max(ready, free);
    if (!tied_meet(r, r == first ? last : first, ready, &t0)) return false;
    const double t1 =
        r == last ? send_tied(last, first, t0) : t0 + c_.p2p_s(c_.tied_copy_bytes(), last, first);
    if (record_)
      out_.ranks[r].events.push_back({"tied_head_grad", "SEND", Stream::Compute, t0, t1});
    st.cursor = st.tied_end = t1;
    return true;
  }

  double ring_bytes(Collective op, double bytes) const {
    const int d = o_.mesh.dp;
    if (d <= 1) return 0;
    return (op == Collective::AllReduce ? 2.0 : 1.0) * (d - 1) / d * bytes;
  }

  // Memory held over [t0, t1).
  void mem(int r, double t0, double t1, double bytes, int category, int inflight = 0) {
    if (bytes == 0 && inflight == 0) return;
    st_[r].mem.push_back({t0, bytes, category, inflight});
    st_[r].mem.push_back({t1, -bytes, category, -inflight});
  }

  void track_compute(int r, const Action& a, double t0, double t1) {
    RankState& st = st_[r];
    const StageMemory m = c_.memory(a.stage);
    const auto key = std::make_pair(a.stage, a.microbatch);
    const schedule::Shape& sh = s_.shape;
    // A received activation becomes the stage's input, kept until the micro-batch's B (or I)
    // ends; the model says how much of it its activation bytes do not count already.
    if (a.kind == Kind::F && a.stage > 0 && sh.rank_of(a.stage - 1) != r) {
      take_receive(r, slot(a.stage, a.microbatch, 0), t0, c_.boundary_bytes(a.stage - 1));
      if (m.received_input > 0) st.input_since[key] = t0;
    }
    if (a.kind == Kind::B || a.kind == Kind::I) {
      auto it = st.input_since.find(key);
      if (it != st.input_since.end()) {
        mem(r, it->second, t1, m.received_input, 2);
        st.input_since.erase(it);
      }
    }
    if ((a.kind == Kind::B || a.kind == Kind::I) && a.stage + 1 < sh.stages() &&
        sh.rank_of(a.stage + 1) != r)
      take_receive(r, slot(a.stage, a.microbatch, 1), t0, c_.boundary_bytes(a.stage));
    if (a.kind == Kind::F) {
      st.act_since[key] = t0;
      return;
    }
    // The backward's working set: B's, I's, or W's.
    mem(r, t0, t1,
        a.kind == Kind::W                           ? m.working_weight
        : a.kind == Kind::I && m.working_input >= 0 ? m.working_input
                                                    : m.working,
        3);
    // The full gradient buffer appears with the stage's first backward of the step, an I
    // included: I adds the gradients of the parameters no recorded product owns (norms,
    // biases, embeddings) into it, as the runtime's ParamBuffer::ensure_grads before I.
    if (a.kind != Kind::F && m.grad_buffer > 0 && buffer_started_.insert(a.stage).second)
      st.buffer_since[a.stage] = t0;
    // I releases the activation but W's inputs (when the model knows them), W those.
    const bool keeps_w_inputs = a.kind == Kind::I && m.weight_inputs >= 0;
    if (a.kind == Kind::B || a.kind == Kind::W || keeps_w_inputs) {
      auto it = st.act_since.find(key);
      if (it != st.act_since.end()) {
        mem(r, it->second, t1, m.activation, 2, 1);
        st.act_since.erase(it);
      }
    }
    if (keeps_w_inputs) st.w_since[key] = t1;
    if (a.kind == Kind::W) {
      auto it = st.w_since.find(key);
      if (it != st.w_since.end()) {
        mem(r, it->second, t1, m.weight_inputs, 2, 1);
        st.w_since.erase(it);
      }
    }
  }

  void finish(int r) {
    RankState& st = st_[r];
    RankResult& rr = out_.ranks[r];
    double t = st.opt_start;
    // Static state of the rank's stages; anything still gathered or buffered ends here.
    MemoryBreakdown base;
    const std::vector<int> mine = stages_of(r);
    double buffers = 0, saved = 0;
    for (int s : mine) {
      const StageMemory m = c_.memory(s);
      base.params += m.params;
      base.grads += m.grads;
      base.optimizer += m.optimizer;
      buffers = std::max(buffers, m.buffers);
      saved += m.saved;
    }
    base.params += buffers;
    if (o_.async_save == SimOptions::Snapshot::Device) base.snapshot = saved;
    if (o_.async_save == SimOptions::Snapshot::Host) rr.host_snapshot = saved;
    for (auto& [s, since] : st.gathered_since) mem(r, since, t, c_.memory(s).gathered, 0);
    for (auto& [s, since] : st.buffer_since) mem(r, since, t, c_.memory(s).grad_buffer, 1);
    for (auto& [key, since] : st.act_since) mem(r, since, t, c_.memory(key.first).activation, 2, 1);
    for (auto& [key, since] : st.w_since)
      mem(r, since, t, c_.memory(key.first).weight_inputs, 2, 1);
    for (auto& [key, since] : st.input_since)
      mem(r, since, t, c_.memory(key.first).received_input, 2);
    // Optimizer, then (zero1 / zero2) the all-gather of the updated parameters.
    if (record_ && st.opt_end > st.opt_start)
      rr.events.push_back({"optimizer", "optimizer", Stream::Compute, st.opt_start, st.opt_end});
    t = st.opt_end;
    if (o_.mesh.dp > 1 && (o_.dp_mode == DpMode::Zero1 || o_.dp_mode == DpMode::Zero2)) {
      for (int s : mine) {
        const double t1 =
            t + c_.collective_s(Collective::AllGather, c_.param_bytes(s), o_.mesh.dp_group(r));
        rr.dp_s += t1 - t;
        rr.dp_bytes += ring_bytes(Collective::AllGather, c_.param_bytes(s));
        if (record_)
          rr.events.push_back({detail::concat(s, "ALL_GATHER"), "ALL_GATHER", Stream::Dp, t, t1});
        t = t1;
      }
      // Overlapped with the next step's forward (Megatron-Core --overlap-param-gather): only
      // the first bucket, which the first forward waits for, stays on the step.
      if (o_.param_gather_bucket_bytes > 0 && !mine.empty()) {
        const double first = std::min(o_.param_gather_bucket_bytes, c_.param_bytes(mine[0]));
        t = std::min(
            t, st.opt_end + c_.collective_s(Collective::AllGather, first, o_.mesh.dp_group(r)));
      }
    }
    // The light modes' all-reduce after the step (slim, diloco); streaming-diloco runs it
    // behind its next inner steps, of which only what outlasts them stays on the step.
    if (o_.mesh.dp > 1) {
      const double compute_end = t;
      for (int s : mine) {
        const double bytes = c_.sync_bytes(s);
        if (bytes <= 0) continue;
        const double t1 = t + c_.collective_s(Collective::AllReduce, bytes, o_.mesh.dp_group(r));
        rr.dp_s += t1 - t;
        rr.dp_bytes += ring_bytes(Collective::AllReduce, bytes);
        if (record_) rr.events.push_back({detail::concat(s, "SYNC"), "SYNC", Stream::Dp, t, t1});
        t = t1;
      }
      if (c_.sync_overlap_steps() > 0)
        t = std::max(compute_end, t - c_.sync_overlap_steps() * compute_end);
    }
    rr.end_s = t;

    // Peak over time; frees before allocations at equal times.
    std::sort(st.mem.begin(), st.mem.end(), [](const MemEvent& a, const MemEvent& b) {
      return a.t != b.t ? a.t < b.t : a.delta < b.delta;
    });
    double cur[4] = {0, 0, 0, 0};
    int inflight = 0;
    rr.peak = base;
    for (const MemEvent& e : st.mem) {
      cur[e.category] += e.delta;
      inflight += e.inflight;
      rr.peak_kept = std::max(rr.peak_kept, cur[2]);
      const double total = base.total() + cur[0] + cur[1] + cur[2] + cur[3];
      if (total > rr.peak.total() + 1e-9) {
        rr.peak = {base.params + cur[0], base.grads + cur[1], base.optimizer, cur[2], cur[3],
                   base.snapshot};
        rr.peak_inflight = inflight;
      }
    }
  }

  const schedule::Schedule& s_;
  const CostModel& c_;
  const SimOptions& o_;
  bool record_;
  std::vector<double> arrival_;
  std::vector<double> posted_;  // blocking p2p: when the receiver posted each message's receive
  std::vector<RankState> st_;
  std::set<int> buffer_started_;  // stages whose buffer was allocated this step
  double compute_end_ = 0;
  // rank -> peer -> the messages the peer sends it, in its order (the executor posts receives so)
  std::vector<std::map<int, std::vector<size_t>>> sent_to_;
  double tied_weight_arrival_ = -1;       // the tied head's copy at the last stage's rank
  std::unique_ptr<CoreSharing> sharing_;  // shared cores only
  SimResult out_;
};

}  // namespace

double SimResult::peak_memory() const {
  double m = 0;
  for (const RankResult& r : ranks) m = std::max(m, r.peak.total());
  return m;
}

int SimResult::peak_rank() const {
  int best = 0;
  for (size_t r = 0; r < ranks.size(); ++r)
    if (ranks[r].peak.total() > ranks[best].peak.total()) best = static_cast<int>(r);
  return best;
}

schedule::Timing SimResult::timing() const {
  schedule::Timing t;
  t.ranks.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r)
    for (const SimEvent& e : ranks[r].events) {
      if (e.stream != Stream::Compute || e.name == "optimizer") continue;
      t.ranks[r].push_back({schedule::parse_action(e.name), e.start * 1e3, e.end * 1e3});
    }
  t.makespan = step_s * 1e3;
  return t;
}

SimResult simulate(const schedule::Schedule& lowered, const CostModel& cost,
                   const SimOptions& opts) {
  Sim real(lowered, cost, opts, opts.timeline);
  SimResult out = real.run();
  if (!opts.split_exposed) return out;
  FreeCommModel free(cost);
  Sim ideal(lowered, free, opts, false);
  SimResult ir = ideal.run();
  out.ideal_step_s = ir.step_s;
  out.exposed_comm_s = std::max(0.0, out.step_s - ir.step_s);
  double busy = 0;
  for (const RankResult& r : ir.ranks) busy += r.compute_s;
  const double span = ideal.compute_makespan();
  out.bubble_fraction = span > 0 ? 1.0 - busy / (span * lowered.shape.pp) : 0;
  return out;
}

}  // namespace loom::plan

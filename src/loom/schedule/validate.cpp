#include "loom/schedule/validate.h"

#include <algorithm>
#include <optional>

#include "loom/common/error.h"
#include "loom/schedule/deps.h"

namespace loom::schedule {
namespace {

using loom::detail::concat;

struct Pos {
  int rank = -1;
  int index = -1;
  bool found() const { return rank >= 0; }
};

struct Problem {
  std::string message;
  std::vector<Pos> marks;
};

constexpr int kKinds = static_cast<int>(Kind::REDUCE_GRAD) + 1;

std::string render_grid(const Schedule& s, const std::vector<Pos>& marks) {
  size_t width = 0;
  for (const auto& list : s.ranks)
    for (const Action& a : list) width = std::max(width, to_string(a).size() + 2);
  const size_t label = concat("rank ", s.ranks.empty() ? 0 : s.ranks.size() - 1).size();
  std::string out;
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    std::string line = concat("rank ", r);
    line.resize(label, ' ');
    line += " |";
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      bool marked = std::any_of(marks.begin(), marks.end(), [&](const Pos& p) {
        return p.rank == static_cast<int>(r) && p.index == static_cast<int>(i);
      });
      std::string text = to_string(s.ranks[r][i]);
      std::string cell = marked ? "[" + text + "]" : " " + text + " ";
      cell.resize(width, ' ');
      line += " " + cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

class Checker {
 public:
  explicit Checker(const Schedule& s) : s_(s), shape_(s.shape) {}

  std::optional<Problem> run() {
    if (auto p = check_shape()) return p;
    if (auto p = check_ranges()) return p;
    if (auto p = index_actions()) return p;
    if (auto p = check_complete()) return p;
    if (auto p = check_p2p()) return p;
    if (auto p = check_order()) return p;
    if (auto p = check_sharding()) return p;
    return simulate();
  }

 private:
  int stages() const { return shape_.stages(); }
  int m() const { return shape_.microbatches; }

  Pos& pos(Kind k, int stage, int mb) {
    size_t slot = (static_cast<size_t>(k) * stages() + stage) * (m() + 1) + (mb + 1);
    return pos_[slot];
  }
  Pos& pos(const Action& a) { return pos(a.kind, a.stage, a.microbatch); }
  std::string at(const Pos& p) const { return concat("rank ", p.rank, " step ", p.index); }
  const Action& action(const Pos& p) const { return s_.ranks[p.rank][p.index]; }
  std::string name(const Pos& p) const { return to_string(action(p)); }
  bool crosses(int a, int b) const { return shape_.rank_of(a) != shape_.rank_of(b); }

  std::optional<Problem> check_shape() {
    if (shape_.pp < 1 || shape_.loops < 1 || shape_.microbatches < 1)
      return Problem{concat("bad shape pp=", shape_.pp, " loops=", shape_.loops,
                            " microbatches=", shape_.microbatches, ": all must be >= 1"),
                     {}};
    if (static_cast<int>(s_.ranks.size()) != shape_.pp)
      return Problem{concat("schedule has ", s_.ranks.size(), " rank lists but pp=", shape_.pp),
                     {}};
    return std::nullopt;
  }

  std::optional<Problem> check_ranges() {
    for (int r = 0; r < shape_.pp; ++r) {
      for (int i = 0; i < static_cast<int>(s_.ranks[r].size()); ++i) {
        const Action& a = s_.ranks[r][i];
        Pos p{r, i};
        if (static_cast<int>(a.kind) >= kKinds)
          return Problem{concat(at(p), ": unknown action kind"), {p}};
        if (a.stage < 0 || a.stage >= stages())
          return Problem{concat(at(p), ": ", to_string(a), " names stage ", a.stage,
                                ", outside stages 0..", stages() - 1),
                         {p}};
        if (shape_.rank_of(a.stage) != r)
          return Problem{concat(at(p), ": ", to_string(a), " runs on the wrong rank; stage ",
                                a.stage, " is owned by rank ", shape_.rank_of(a.stage), " (",
                                placement_name(shape_.placement), " placement)"),
                         {p}};
        if (is_stage_level(a.kind) && a.microbatch != kNoMicrobatch)
          return Problem{concat(at(p), ": ", to_string(a), " must not name a micro-batch"), {p}};
        if (!is_stage_level(a.kind) && (a.microbatch < 0 || a.microbatch >= m()))
          return Problem{concat(at(p), ": ", to_string(a), " names micro-batch ", a.microbatch,
                                ", outside 0..", m() - 1),
                         {p}};
      }
    }
    return std::nullopt;
  }

  std::optional<Problem> index_actions() {
    pos_.assign(static_cast<size_t>(kKinds) * stages() * (m() + 1), Pos{});
    for (int r = 0; r < shape_.pp; ++r) {
      for (int i = 0; i < static_cast<int>(s_.ranks[r].size()); ++i) {
        const Action& a = s_.ranks[r][i];
        lowered_ = lowered_ || is_p2p(a.kind);
        if (a.kind == Kind::UNSHARD || a.kind == Kind::RESHARD) continue;  // may repeat
        Pos& first = pos(a);
        if (first.found())
          return Problem{
              concat(at({r, i}), ": duplicate ", to_string(a), " (already at ", at(first), ")"),
              {{r, i}}};
        first = {r, i};
      }
    }
    return std::nullopt;
  }

  std::optional<Problem> check_complete() {
    for (int st = 0; st < stages(); ++st) {
      for (int j = 0; j < m(); ++j) {
        Action f{st, Kind::F, j};
        Pos b = pos(Kind::B, st, j), i = pos(Kind::I, st, j), w = pos(Kind::W, st, j);
        if (!pos(f).found())
          return Problem{concat("missing ", to_string(f),
                                ": every stage and micro-batch needs exactly one forward"),
                         {}};
        if (b.found() && (i.found() || w.found())) {
          Pos later = i.found() ? i : w;
          return Problem{concat(at(later), ": stage ", st, " micro-batch ", j,
                                " has both B and I/W; use B, or I and W"),
                         {later}};
        }
        if (!b.found() && !i.found() && !w.found())
          return Problem{
              concat("missing backward ", to_string({st, Kind::B, j}), " (or ",
                     to_string({st, Kind::I, j}), " and ", to_string({st, Kind::W, j}), ")"),
              {}};
        if (i.found() && !w.found())
          return Problem{concat("missing ", to_string({st, Kind::W, j}), " after ", name(i)), {i}};
        if (w.found() && !i.found())
          return Problem{
              concat("missing ", to_string({st, Kind::I, j}), " that ", name(w), " needs"), {w}};
      }
    }
    // REDUCE_GRAD is optional, but all stages or none.
    int reduced = 0;
    for (int st = 0; st < stages(); ++st) reduced += pos(Kind::REDUCE_GRAD, st, -1).found();
    if (reduced > 0 && reduced < stages())
      for (int st = 0; st < stages(); ++st)
        if (!pos(Kind::REDUCE_GRAD, st, -1).found())
          return Problem{concat("missing ", st, "REDUCE_GRAD: other stages reduce gradients"), {}};
    return std::nullopt;
  }

  // Lowered schedules carry a SEND/RECV pair for every boundary between ranks, and no others.
  std::optional<Problem> check_p2p() {
    if (!lowered_) return std::nullopt;
    for (int st = 0; st < stages(); ++st) {
      bool from_prev = st > 0 && crosses(st - 1, st);
      bool to_next = st + 1 < stages() && crosses(st, st + 1);
      const std::pair<Kind, bool> want[] = {{Kind::RECV_F, from_prev},
                                            {Kind::SEND_B, from_prev},
                                            {Kind::SEND_F, to_next},
                                            {Kind::RECV_B, to_next}};
      for (int j = 0; j < m(); ++j) {
        for (auto [kind, needed] : want) {
          Action a{st, kind, j};
          Pos p = pos(a);
          if (needed && !p.found())
            return Problem{concat("lowered schedule lacks ", to_string(a),
                                  ": the neighbouring stage is on another rank"),
                           {}};
          if (!needed && p.found())
            return Problem{concat(at(p), ": ", to_string(a),
                                  " has no partner (no neighbouring stage on another rank)"),
                           {p}};
        }
      }
    }
    return std::nullopt;
  }

  std::optional<Problem> need_before(const Pos& p, const Pos& dep, const Action& dep_action) {
    if (dep.found() && dep.rank == p.rank && dep.index > p.index)
      return Problem{concat(at(p), ": ", name(p), " comes before ", to_string(dep_action),
                            " (step ", dep.index, "), which it needs"),
                     {p}};
    if (!dep.found() && p.rank == shape_.rank_of(dep_action.stage))
      return Problem{
          concat(at(p), ": ", name(p), " needs ", to_string(dep_action), ", which is missing"),
          {p}};
    return std::nullopt;
  }

  // Orders that one rank's list decides on its own: dependencies on the same rank, RECV before
  // the compute that uses it, SEND after the compute that produces it, REDUCE_GRAD last.
  std::optional<Problem> check_order() {
    for (int r = 0; r < shape_.pp; ++r) {
      for (int i = 0; i < static_cast<int>(s_.ranks[r].size()); ++i) {
        const Action& a = s_.ranks[r][i];
        const Pos p{r, i};
        const int st = a.stage, j = a.microbatch;
        std::optional<Problem> bad;
        auto need = [&](const Action& dep) {
          if (!bad) bad = need_before(p, pos(dep), dep);
        };
        auto backward_input = [&](int stage) {  // B or I, whichever the schedule uses
          return pos(Kind::I, stage, j).found() ? Action{stage, Kind::I, j}
                                                : Action{stage, Kind::B, j};
        };
        switch (a.kind) {
          case Kind::F:
            if (st > 0 && !crosses(st - 1, st)) need({st - 1, Kind::F, j});
            if (st > 0 && crosses(st - 1, st) && lowered_) need({st, Kind::RECV_F, j});
            break;
          case Kind::B:
          case Kind::I:
            need({st, Kind::F, j});
            if (st + 1 < stages() && !crosses(st, st + 1)) need(backward_input(st + 1));
            if (st + 1 < stages() && crosses(st, st + 1) && lowered_) need({st, Kind::RECV_B, j});
            break;
          case Kind::W: need({st, Kind::I, j}); break;
          case Kind::SEND_F: need({st, Kind::F, j}); break;
          case Kind::SEND_B: need(backward_input(st)); break;
          case Kind::REDUCE_GRAD:
            for (int mb = 0; mb < m() && !bad; ++mb)
              need(pos(Kind::W, st, mb).found() ? Action{st, Kind::W, mb}
                                                : Action{st, Kind::B, mb});
            break;
          default: break;
        }
        if (bad) return bad;
      }
    }
    return std::nullopt;
  }

  // A stage with UNSHARD/RESHARD actions must be gathered whenever it computes, and the
  // actions must alternate, ending resharded.
  std::optional<Problem> check_sharding() {
    for (int r = 0; r < shape_.pp; ++r) {
      std::vector<int> state(stages(), -1);  // -1 unsharded stage, 0 sharded, 1 gathered
      std::vector<Pos> last_unshard(stages());
      for (const Action& a : s_.ranks[r])
        if (a.kind == Kind::UNSHARD || a.kind == Kind::RESHARD) state[a.stage] = 0;
      for (int i = 0; i < static_cast<int>(s_.ranks[r].size()); ++i) {
        const Action& a = s_.ranks[r][i];
        const Pos p{r, i};
        int& st = state[a.stage];
        if (st < 0) continue;
        if (a.kind == Kind::UNSHARD) {
          if (st == 1)
            return Problem{concat(at(p), ": ", name(p), " but stage ", a.stage,
                                  " is already gathered (RESHARD it first)"),
                           {p}};
          st = 1;
          last_unshard[a.stage] = p;
        } else if (a.kind == Kind::RESHARD) {
          if (st == 0)
            return Problem{concat(at(p), ": ", name(p), " but stage ", a.stage, " is not gathered"),
                           {p}};
          st = 0;
        } else if (is_compute(a.kind) && st == 0) {
          return Problem{concat(at(p), ": ", name(p), " runs while stage ", a.stage,
                                "'s parameters are sharded (UNSHARD it before)"),
                         {p}};
        }
      }
      for (int stage = 0; stage < stages(); ++stage)
        if (state[stage] == 1)
          return Problem{concat("stage ", stage, " is still gathered at the end of rank ", r,
                                "'s list (RESHARD after its last backward)"),
                         {last_unshard[stage]}};
    }
    return std::nullopt;
  }

  bool done(const Pos& p, const std::vector<int>& next) const {
    return p.found() && next[p.rank] > p.index;
  }

  // Every rank runs its list in order; RECV waits for its SEND, compute waits for the actions
  // it depends on. Sends never block.
  std::optional<Problem> simulate() {
    std::vector<int> next(shape_.pp, 0);
    // Returns the action a blocked action waits for, or nullopt when it can run.
    auto waits_for = [&](const Action& a) -> std::optional<Action> {
      if (a.kind == Kind::RECV_F) {
        Action send{a.stage - 1, Kind::SEND_F, a.microbatch};
        if (!done(pos(send), next)) return send;
      } else if (a.kind == Kind::RECV_B) {
        Action send{a.stage + 1, Kind::SEND_B, a.microbatch};
        if (!done(pos(send), next)) return send;
      } else if (is_compute(a.kind)) {
        detail::Dep deps[2];
        int n = detail::deps_of(shape_, a, deps);
        for (int d = 0; d < n; ++d) {
          const detail::Dep& dep = deps[d];
          Action need{dep.stage, Kind::F, dep.microbatch};
          if (dep.slot == detail::Slot::InputGrad)
            need.kind = pos(Kind::I, dep.stage, dep.microbatch).found() ? Kind::I : Kind::B;
          if (!done(pos(need), next)) return need;
        }
      }
      return std::nullopt;
    };
    for (;;) {
      bool progress = false, finished = true;
      for (int r = 0; r < shape_.pp; ++r) {
        const auto& list = s_.ranks[r];
        while (next[r] < static_cast<int>(list.size()) && !waits_for(list[next[r]])) {
          ++next[r];
          progress = true;
        }
        finished = finished && next[r] == static_cast<int>(list.size());
      }
      if (finished) return std::nullopt;
      if (progress) continue;
      Problem p{"deadlock: no rank can progress;", {}};
      for (int r = 0; r < shape_.pp; ++r) {
        if (next[r] == static_cast<int>(s_.ranks[r].size())) continue;
        Pos blocked{r, next[r]};
        p.message +=
            concat(p.marks.empty() ? " " : ", ", "rank ", r, " blocked at ", name(blocked),
                   " step ", next[r], " waiting for ", to_string(*waits_for(action(blocked))));
        p.marks.push_back(blocked);
      }
      return p;
    }
  }

  const Schedule& s_;
  const Shape& shape_;
  std::vector<Pos> pos_;
  bool lowered_ = false;
};

}  // namespace

ValidationResult check(const Schedule& s) {
  ValidationResult result;
  std::optional<Problem> problem = Checker(s).run();
  if (!problem) return result;
  result.ok = false;
  result.message = problem->message;
  result.grid = render_grid(s, problem->marks);
  return result;
}

void validate(const Schedule& s) {
  ValidationResult r = check(s);
  if (!r.ok) throw UsageError(r.message + "\n" + r.grid);
}

}  // namespace loom::schedule

#include "loom/schedule/lower.h"

#include <algorithm>

#include "loom/common/error.h"
#include "loom/schedule/validate.h"

namespace loom::schedule {
namespace {

// Stage `stage` is gathered while the rank computes list entries first..last; the UNSHARD goes
// in front of entry `unshard` (<= first) and the RESHARD right after entry `last`.
struct Gather {
  int stage;
  int first;
  int last;
  int unshard;
};

bool is_backward(Kind k) {
  return k == Kind::B || k == Kind::I || k == Kind::W;
}

// The gathers one rank needs (see lower.h): one per stage, or with reshard_after_forward one
// per visit, a visit being a run of the stage's forwards among the rank's forwards (or of its
// backwards among the rank's backwards); overlapping visits of a stage share one gather.
std::vector<Gather> needed_gathers(const std::vector<Action>& list, int stages,
                                   bool reshard_after_forward) {
  // visits[phase][stage]; without reshard_after_forward both phases share one visit per stage.
  std::vector<std::vector<Gather>> visits[2] = {std::vector<std::vector<Gather>>(stages),
                                                std::vector<std::vector<Gather>>(stages)};
  int last_stage[2] = {-1, -1};  // stage of the rank's previous forward / backward
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    const Action& a = list[i];
    const int phase = reshard_after_forward && is_backward(a.kind) ? 1 : 0;
    auto& mine = visits[phase][a.stage];
    const bool new_visit = reshard_after_forward ? last_stage[phase] != a.stage : mine.empty();
    last_stage[phase] = a.stage;
    if (new_visit)
      mine.push_back({a.stage, i, i, i});
    else
      mine.back().last = i;
  }
  std::vector<Gather> out;
  for (int st = 0; st < stages; ++st) {
    std::vector<Gather> all = visits[0][st];
    all.insert(all.end(), visits[1][st].begin(), visits[1][st].end());
    std::sort(all.begin(), all.end(),
              [](const Gather& a, const Gather& b) { return a.first < b.first; });
    const size_t begin = out.size();
    for (const Gather& g : all) {
      if (out.size() > begin && g.first <= out.back().last)
        out.back().last = std::max(out.back().last, g.last);
      else
        out.push_back(g);
    }
  }
  std::sort(out.begin(), out.end(), [](const Gather& a, const Gather& b) {
    return a.first != b.first ? a.first < b.first : a.stage < b.stage;
  });
  return out;
}

// Prefetch one gather ahead: each UNSHARD moves earlier, in order of first use, while fewer
// than max_unsharded stages are gathered there, but not before the first compute action of the
// previous gather nor before the stage's own previous RESHARD.
void place_unshards(std::vector<Gather>& gathers, int n, int stages, int max_unsharded) {
  std::vector<int> held(n, 0);
  std::vector<int> prev_last(stages, -1);
  int prev_first = 0;
  for (Gather& g : gathers) {
    const int earliest = std::max(prev_first, prev_last[g.stage] + 1);
    int at = g.first;
    while (at > earliest && held[at - 1] < max_unsharded) --at;
    g.unshard = at;
    for (int i = at; i <= g.last; ++i) ++held[i];
    prev_last[g.stage] = g.last;
    prev_first = g.first;
  }
}

}  // namespace

Schedule lower(const Schedule& compute_only, const LowerOptions& opts) {
  for (const auto& list : compute_only.ranks)
    for (const Action& a : list)
      if (!is_compute(a.kind))
        LOOM_USAGE("lower() takes a compute-only schedule, but '", compute_only.name,
                   "' already has ", to_string(a));
  if (opts.dp_mode == DpMode::ZeroParams && opts.max_unsharded < 1)
    LOOM_USAGE("max_unsharded must be >= 1 (got ", opts.max_unsharded, ")");
  validate(compute_only);

  const Shape& shape = compute_only.shape;
  const int stages = shape.stages();
  Schedule out;
  out.name = compute_only.name;
  out.shape = shape;
  out.ranks.resize(shape.pp);
  for (int r = 0; r < shape.pp; ++r) {
    const std::vector<Action>& list = compute_only.ranks[r];
    const int n = static_cast<int>(list.size());
    std::vector<int> last_backward(stages, -1);
    for (int i = 0; i < n; ++i)
      if (list[i].kind == Kind::B || list[i].kind == Kind::W) last_backward[list[i].stage] = i;

    std::vector<std::vector<int>> unshard_at(n), reshard_after(n);
    if (opts.dp_mode == DpMode::ZeroParams) {
      std::vector<Gather> gathers = needed_gathers(list, stages, opts.reshard_after_forward);
      place_unshards(gathers, n, stages, opts.max_unsharded);
      for (const Gather& g : gathers) {
        unshard_at[g.unshard].push_back(g.stage);
        reshard_after[g.last].push_back(g.stage);
      }
    }

    std::vector<Action>& dst = out.ranks[r];
    for (int i = 0; i < n; ++i) {
      const Action& a = list[i];
      const int s = a.stage, j = a.microbatch;
      const bool prev_remote = s > 0 && shape.rank_of(s - 1) != r;
      const bool next_remote = s + 1 < stages && shape.rank_of(s + 1) != r;
      for (int st : unshard_at[i]) dst.push_back({st, Kind::UNSHARD, kNoMicrobatch});
      if (a.kind == Kind::F) {
        if (prev_remote) dst.push_back({s, Kind::RECV_F, j});
        dst.push_back(a);
        if (next_remote) dst.push_back({s, Kind::SEND_F, j});
      } else if (a.kind == Kind::B || a.kind == Kind::I) {
        if (next_remote) dst.push_back({s, Kind::RECV_B, j});
        dst.push_back(a);
        if (prev_remote) dst.push_back({s, Kind::SEND_B, j});
      } else {
        dst.push_back(a);
      }
      if (opts.dp_mode != DpMode::None && last_backward[s] == i)
        dst.push_back({s, Kind::REDUCE_GRAD, kNoMicrobatch});
      for (int st : reshard_after[i]) dst.push_back({st, Kind::RESHARD, kNoMicrobatch});
    }
  }
  return out;
}

}  // namespace loom::schedule

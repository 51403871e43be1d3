#include "loom/model/partition.h"

#include <algorithm>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

#include "loom/common/error.h"

namespace loom::model {
namespace {

Partition uniform(int blocks, int stages) {
  Partition p;
  p.blocks = blocks;
  int base = blocks / stages, extra = blocks % stages, at = 0;
  for (int s = 0; s < stages; ++s) {
    p.first.push_back(at);
    at += base + (s < extra ? 1 : 0);
  }
  return p;
}

// Minimizes the maximum stage cost; ties broken towards earlier cuts. O(stages * blocks^2).
Partition balanced(const std::vector<double>& costs, int stages) {
  int n = static_cast<int>(costs.size());
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: minimal max-cost of splitting blocks [0, i) into s stages.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= n; ++i)
      for (int j = s - 1; j < i; ++j) {
        double c = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (c < best[s][i] - 1e-12 * std::abs(c)) {
          best[s][i] = c;
          cut[s][i] = j;
        }
      }
  Partition p;
  p.blocks = n;
  p.first.assign(stages, 0);
  int i = n;
  for (int s = stages; s >= 1; --s) {
    p.first[s - 1] = cut[s][i];
    i = cut[s][i];
  }
  return p;
}

// V placement over p ranks (2p stages, rank r holds stages r and 2p - 1 - r). The V folds the
// block list: rank 0 takes a prefix and a suffix, rank 1 the next ones inwards, ..., the last
// rank the middle (its two stages adjacent). Three bounds, each the smallest under the ones
// before (bisection on VCut::feasible):
//  L, a rank's load (its share of every step);
//  M, a rank's activation memory at zbv's peak, when rank r holds 2p - r - 1 micro-batches of
//     its first stage and r + 1 of its second (docs/schedules.md): a first stage costs more
//     memory than a second one of the same size; up to 5 % above the least (a FLOP-weighted
//     estimate should not buy a sliver of memory with a lopsided pair of stages);
//  S, a stage's cost (a rank's two stages as even as they can be: an uneven pair makes the
//     other rank wait inside the step).
class VCut {
 public:
  VCut(const std::vector<double>& costs, int p) : n_(static_cast<int>(costs.size())), p_(p) {
    P_.assign(n_ + 1, 0);
    for (int i = 0; i < n_; ++i) P_[i + 1] = P_[i] + costs[i];
  }
  double total() const { return P_[n_]; }

  // reach[i][j]: ranks 0..k-1 can take the prefix [0, i) and the suffix [j, n) within the
  // bounds, every stage non-empty. Rank k then takes [i, i') and [j', j); for a given i the
  // smallest reachable j > j' is the best (every bound limits P[j] from above). O(p n^3).
  bool feasible(double L, double M, double S) {
    std::vector<std::vector<char>> reach(n_ + 1, std::vector<char>(n_ + 1, 0));
    reach[0][n_] = 1;
    from_.assign(p_, std::vector<std::vector<std::pair<int, int>>>(
                         n_ + 1, std::vector<std::pair<int, int>>(n_ + 1, {-1, -1})));
    for (int k = 0; k + 1 < p_; ++k) {
      const double a = 2 * p_ - k - 1, b = k + 1;  // micro-batches of each stage at the peak
      // first_j[i][j]: the smallest j'' >= j with reach[i][j''], or n + 1.
      std::vector<std::vector<int>> first_j(n_ + 1, std::vector<int>(n_ + 2, n_ + 1));
      for (int i = 0; i <= n_; ++i)
        for (int j = n_; j >= 0; --j) first_j[i][j] = reach[i][j] ? j : first_j[i][j + 1];
      std::vector<std::vector<char>> next(n_ + 1, std::vector<char>(n_ + 1, 0));
      const int inner = 2 * (p_ - k - 1);  // stages still to place between i' and j'
      for (int i2 = 1; i2 <= n_; ++i2)
        for (int j2 = i2 + inner; j2 < n_; ++j2)
          for (int i = i2 - 1; i >= 0 && P_[i2] - P_[i] <= std::min(S, L); --i) {
            const int j = first_j[i][j2 + 1];
            if (j > n_) continue;
            const double down = P_[i2] - P_[i], up = P_[j] - P_[j2];
            if (up <= S && down + up <= L && a * down + b * up <= M) {
              next[i2][j2] = 1;
              from_[k + 1][i2][j2] = {i, j};
              break;
            }
          }
      reach = std::move(next);
    }
    // The last rank takes the whole middle (p micro-batches of each of its stages at the
    // peak), split where its halves are most even.
    for (int i = 0; i <= n_; ++i)
      for (int j = i + 2; j <= n_; ++j) {
        if (!reach[i][j] || P_[j] - P_[i] > L || p_ * (P_[j] - P_[i]) > M) continue;
        const int c = middle_split(i, j);
        if (std::max(P_[c] - P_[i], P_[j] - P_[c]) <= S) {
          last_ = {i, j};
          return true;
        }
      }
    return false;
  }

  // The partition the last successful feasible() found.
  Partition result() const {
    std::vector<int> first(2 * p_, 0);
    auto [i, j] = last_;
    for (int k = p_ - 1; k >= 1; --k) {  // rank k's outer cuts are where rank k - 1 left off
      first[k] = i;
      first[2 * p_ - k] = j;
      std::tie(i, j) = from_[k][i][j];
    }
    first[p_] = middle_split(last_.first, last_.second);
    Partition out;
    out.blocks = n_;
    out.first = first;
    return out;
  }

 private:
  // The cut c in (i, j) that makes max(P[c] - P[i], P[j] - P[c]) smallest.
  int middle_split(int i, int j) const {
    int best = i + 1;
    for (int c = i + 1; c < j; ++c)
      if (std::max(P_[c] - P_[i], P_[j] - P_[c]) < std::max(P_[best] - P_[i], P_[j] - P_[best]))
        best = c;
    return best;
  }

  int n_, p_;
  std::vector<double> P_;
  std::vector<std::vector<std::vector<std::pair<int, int>>>> from_;
  std::pair<int, int> last_{-1, -1};
};

// Bisection for the smallest bound in [lo, hi] that `ok` accepts (ok(hi) holds).
template <typename Ok>
double smallest_bound(double lo, double hi, double tolerance, const Ok& ok) {
  for (int it = 0; it < 200 && hi - lo > tolerance; ++it) {
    const double mid = (lo + hi) / 2;
    (ok(mid) ? hi : lo) = mid;
  }
  return hi;
}

Partition balanced_v(const std::vector<double>& costs, int p) {
  VCut v(costs, p);
  const double inf = std::numeric_limits<double>::infinity(), tol = 1e-9 * v.total();
  const double L =
      smallest_bound(0, v.total(), tol, [&](double x) { return v.feasible(x, inf, inf); }) + tol;
  // Memory is a FLOP-weighted estimate: within 5 % of the least, the evener stages win.
  const double M = 1.05 * smallest_bound(0, 2 * p * v.total(), 2 * p * tol,
                                         [&](double x) { return v.feasible(L, x, inf); }) +
                   2 * p * tol;
  const double S = smallest_bound(0, L, tol, [&](double x) { return v.feasible(L, M, x); });
  LOOM_CHECK(v.feasible(L, M, S), "no V partition of ", costs.size(), " blocks over ", p, " ranks");
  return v.result();
}

}  // namespace

std::string Partition::describe() const {
  std::ostringstream os;
  for (int s = 0; s < int(first.size()); ++s)
    os << (s ? " " : "") << "[" << begin(s) << "," << end(s) << ")";
  return os.str();
}

Partition partition(const std::vector<double>& costs, int stages, const std::string& spec,
                    bool v_placement) {
  int blocks = static_cast<int>(costs.size());
  if (stages < 1) LOOM_USAGE("the number of stages must be at least 1, got ", stages);
  if (blocks < stages)
    LOOM_USAGE("the model has ", blocks, " blocks but pp x loops = ", stages,
               " stages need at least one each; lower --pp or --loops, or add layers");
  if (spec == "flops")
    return v_placement && stages % 2 == 0 && stages > 2 ? balanced_v(costs, stages / 2)
                                                        : balanced(costs, stages);
  if (spec == "uniform") return uniform(blocks, stages);
  Partition p;
  p.blocks = blocks;
  p.first.push_back(0);
  std::stringstream ss(spec);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    char* end = nullptr;
    long v = std::strtol(tok.c_str(), &end, 10);
    if (tok.empty() || *end != '\0')
      LOOM_USAGE("parallel.partition must be flops, uniform or cut points like \"2,5\", got '",
                 spec, "'");
    if (v <= p.first.back() || v >= blocks)
      LOOM_USAGE("cut points in parallel.partition must increase strictly within (0, ", blocks,
                 "), got '", spec, "'");
    p.first.push_back(static_cast<int>(v));
  }
  if (int(p.first.size()) != stages)
    LOOM_USAGE("parallel.partition gives ", p.first.size() - 1, " cut points but ", stages,
               " stages need ", stages - 1);
  return p;
}

}  // namespace loom::model

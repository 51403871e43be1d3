#include "loom/model/partition.h"

#include <algorithm>
#include <limits>
#include <sstream>

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

}  // namespace

std::string Partition::describe() const {
  std::ostringstream os;
  for (int s = 0; s < int(first.size()); ++s)
    os << (s ? " " : "") << "[" << begin(s) << "," << end(s) << ")";
  return os.str();
}

Partition partition(const std::vector<double>& costs, int stages, const std::string& spec) {
  int blocks = static_cast<int>(costs.size());
  if (stages < 1) LOOM_USAGE("the number of stages must be at least 1, got ", stages);
  if (blocks < stages)
    LOOM_USAGE("the model has ", blocks, " blocks but pp x loops = ", stages,
               " stages need at least one each; lower --pp or --loops, or add layers");
  if (spec == "flops") return balanced(costs, stages);
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

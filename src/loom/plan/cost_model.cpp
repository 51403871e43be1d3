#include "loom/plan/cost_model.h"

namespace loom::plan {

double ConstantCostModel::compute_s(int, schedule::Kind kind) const {
  switch (kind) {
    case schedule::Kind::F: return f;
    case schedule::Kind::B: return b;
    case schedule::Kind::I: return i;
    case schedule::Kind::W: return w;
    default: return 0;
  }
}

double ConstantCostModel::p2p_s(double bytes, int from, int to) const {
  if (network) return network->p2p_s(bytes, from, to);
  return message_s;
}

double ConstantCostModel::collective_s(Collective op, double bytes,
                                       const std::vector<int>& group) const {
  if (group.size() <= 1) return 0;
  if (network) return network->collective_s(op, bytes, group);
  switch (op) {
    case Collective::AllReduce: return all_reduce_s;
    case Collective::ReduceScatter: return reduce_scatter_s;
    default: return all_gather_s;
  }
}

}  // namespace loom::plan

#include "loom/train/trace_clock.h"

#include <unistd.h>

#include <functional>
#include <string>

namespace loom::train {

bool on_one_machine(comm::Backend& world) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const double h = double(std::hash<std::string>{}(host) % (1ull << 52));  // exact in a double
  double id[2] = {h, -h};  // max of both: the largest and (minus) the smallest host hash
  world.all_reduce(id, 2, comm::DType::Float64, comm::ReduceOp::Max)->wait();
  return id[0] == -id[1];
}

double shared_trace_origin(comm::Backend& world, const std::function<double()>& now_us) {
  const bool one_machine = on_one_machine(world);
  world.barrier()->wait();
  double origin = now_us();
  if (one_machine) world.broadcast(&origin, 1, comm::DType::Float64, 0)->wait();
  return origin;
}

}  // namespace loom::train

#include "loom/comm/types.h"

#include <cstdlib>

namespace loom::comm {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::UInt8: return 1;
  }
  return 1;
}

std::string_view op_name(OpKind k) {
  switch (k) {
    case OpKind::AllReduce: return "all_reduce";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::AllGather: return "all_gather";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Barrier: return "barrier";
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
    case OpKind::AllToAll: return "all_to_all";
  }
  return "?";
}

std::chrono::milliseconds default_timeout() {
  static const std::chrono::milliseconds t = [] {
    const char* env = std::getenv("LOOM_COMM_TIMEOUT_S");
    double s = env ? std::atof(env) : 300.0;
    if (s <= 0) s = 300.0;
    return std::chrono::milliseconds(static_cast<long long>(s * 1000));
  }();
  return t;
}

uint64_t Stats::total_bytes() const {
  uint64_t t = 0;
  for (auto b : bytes) t += b;
  return t;
}

uint64_t Stats::total_calls() const {
  uint64_t t = 0;
  for (int k = 0; k < kOpKinds; ++k)
    if (k != static_cast<int>(OpKind::Recv)) t += calls[k];
  return t;
}

Stats& Stats::operator+=(const Stats& o) {
  for (int k = 0; k < kOpKinds; ++k) {
    calls[k] += o.calls[k];
    bytes[k] += o.bytes[k];
  }
  busy_s += o.busy_s;
  return *this;
}

Stats Stats::operator-(const Stats& o) const {
  Stats r = *this;
  for (int k = 0; k < kOpKinds; ++k) {
    r.calls[k] -= o.calls[k];
    r.bytes[k] -= o.bytes[k];
  }
  r.busy_s -= o.busy_s;
  return r;
}

}  // namespace loom::comm

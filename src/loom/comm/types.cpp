#include "loom/comm/types.h"

#include <cstdlib>

#include "loom/common/error.h"
#include "loom/common/text.h"

namespace loom::comm {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::UInt8: return 1;
    case DType::BFloat16: return 2;
  }
  return 1;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
    case DType::BFloat16: return "bfloat16";
  }
  return "?";
}

std::string_view backend_name(BackendKind k) {
  switch (k) {
    case BackendKind::Mpi: return "mpi";
    case BackendKind::Gloo: return "gloo";
    case BackendKind::Nccl: return "nccl";
  }
  return "?";
}

BackendKind parse_backend(std::string_view name) {
  if (name == "mpi") return BackendKind::Mpi;
  if (name == "gloo") return BackendKind::Gloo;
  if (name == "nccl") return BackendKind::Nccl;
  LOOM_USAGE("unknown communication backend '", name, "'; choose mpi, gloo or nccl");
}

namespace {
LinkEmulation g_emulation;
}

double LinkEmulation::delay_s(uint64_t bytes) const {
  double d = latency_s;
  if (bandwidth_bytes_per_s > 0) d += static_cast<double>(bytes) / bandwidth_bytes_per_s;
  return d;
}

void set_link_emulation(const LinkEmulation& e) {
  g_emulation = e;
}
const LinkEmulation& link_emulation() {
  return g_emulation;
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
    if (!env || !*env) return std::chrono::milliseconds(300'000);
    // A mistyped value would leave the default in silence (atof("10m") is 10 s).
    char* end = nullptr;
    const double s = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(s > 0) || s > 1e7)
      LOOM_USAGE("LOOM_COMM_TIMEOUT_S=", text::quote(env),
                 " is not a number of seconds in (0, 1e7]; set it to e.g. 600, or unset it for ",
                 "the default 300");
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

#pragma once
// Plain types of the communication layer (no MPI in this header).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::comm {

enum class DType : uint8_t { Float32, Float64, Int32, Int64, UInt8, BFloat16 };
enum class ReduceOp : uint8_t { Sum, Max, Min };
enum class OpKind : uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Barrier,
  Send,
  Recv,
  AllToAll
};
constexpr int kOpKinds = 8;

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
std::string_view op_name(OpKind k);

// Which library moves the bytes (backend.h). MPI: Open MPI on CPU tensors (CUDA tensors are
// staged through host memory); Gloo and NCCL: c10d's process groups from libtorch.
enum class BackendKind : uint8_t { Mpi, Gloo, Nccl };
std::string_view backend_name(BackendKind k);
// "mpi" | "gloo" | "nccl"; throws UsageError naming the choices otherwise.
BackendKind parse_backend(std::string_view name);

// Default timeout of every operation: long enough for slow oversubscribed CI machines, short
// enough that a hang turns into an error. LOOM_COMM_TIMEOUT_S overrides it process-wide
// (UsageError when it is not a number of seconds > 0).
std::chrono::milliseconds default_timeout();

struct Options {
  std::chrono::milliseconds timeout = default_timeout();
};

// An emulated link (clearly labelled as emulation wherever it is reported): every operation
// completes no earlier than latency + bytes_sent / bandwidth after it started, whatever the
// backend.
struct LinkEmulation {
  double bandwidth_bytes_per_s = 0;  // 0 = no emulation
  double latency_s = 0;
  bool active() const { return bandwidth_bytes_per_s > 0 || latency_s > 0; }
  double delay_s(uint64_t bytes) const;
};
// Process-wide: set once before training starts.
void set_link_emulation(const LinkEmulation& e);
const LinkEmulation& link_emulation();

// Counters of one communicator. Bytes are those this rank sends under a ring algorithm
// (all-reduce 2(d-1)/d n, reduce-scatter, all-gather and all-to-all (d-1)/d n, broadcast n from
// the root),
// so they compare directly with the cost formulas of docs/planner.md whatever the library does
// inside.
struct Stats {
  uint64_t calls[kOpKinds] = {};
  uint64_t bytes[kOpKinds] = {};
  double busy_s = 0;  // sum over operations of (completion - start)
  uint64_t total_bytes() const;
  uint64_t total_calls() const;
  Stats& operator+=(const Stats& o);
  Stats operator-(const Stats& o) const;
};

}  // namespace loom::comm

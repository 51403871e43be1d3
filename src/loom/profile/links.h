#pragma once
// Internal to loom_profile: the link between two ranks, measured through loom's communication
// layer (never MPI directly: only src/loom/comm talks to it).
#include <cstdint>
#include <string>
#include <vector>

namespace loom::profile {

// Ping-pong and all-reduce between ranks 0 and 1 of the world; rank 0 returns
// {latency_s, bandwidth_Bps, allreduce_busbw_Bps}.
std::vector<double> measure_comm();

// Runs `<self> profile --comm-child FILE [slowdown_args]` on two ranks (mpirun -n 2 where
// loom has MPI, else, or with LOOM_COMM=gloo, `loom launch --nproc 2 --comm gloo`) and reads
// its numbers: latency, bandwidth, all-reduce bus bandwidth, and (when asked) the slowdown of
// one rank's compute while the other computes (0 = not measured).
std::vector<double> comm_via_two_ranks(const std::vector<std::string>& slowdown_args);

// Starts n ranks the same way, each timing the layer of `config` at `micro_batch` alone (one
// rank after the other) and then all at once, as a run calibrates (profile/calibration.h);
// returns the median over the samples of (mean time at once) / (mean time alone).
double time_shared_via_ranks(int n, const std::string& config, int64_t micro_batch, double seconds);

}  // namespace loom::profile

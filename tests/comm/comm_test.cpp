// Collectives against values computed by hand, over the world sizes CTest launches (1-4) and
// element counts that break code: 0, 1, odd, large.
#include <c10/util/BFloat16.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "loom/comm/mpi_backend.h"
#include "loom/comm/mpi_engine.h"
#include "loom/comm/single_copy.h"
#include "loom/comm/wait_thread.h"
#include "loom/comm/world.h"
#include "loom/common/error.h"
#include "loom/common/thread_slice.h"

using namespace loom::comm;

namespace {
const std::vector<size_t> kCounts = {0, 1, 7, 1023, (1u << 20) + 3};

float value(int rank, size_t i) {
  return static_cast<float>(rank + 1) * 0.5f + (i % 13);
}
}  // namespace

TEST(Comm, AllReduceSumMaxMin) {
  Backend& w = world();
  int d = w.size();
  for (size_t n : kCounts) {
    std::vector<float> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = value(w.rank(), i);
    w.all_reduce(buf.data(), n, DType::Float32)->wait();
    for (size_t i = 0; i < n; ++i) {
      float expect = 0;
      for (int r = 0; r < d; ++r) expect += value(r, i);
      ASSERT_FLOAT_EQ(buf[i], expect) << "n=" << n << " i=" << i;
    }
    std::vector<int64_t> mx(n, w.rank()), mn(n, w.rank());
    w.all_reduce(mx.data(), n, DType::Int64, ReduceOp::Max)->wait();
    w.all_reduce(mn.data(), n, DType::Int64, ReduceOp::Min)->wait();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(mx[i], d - 1);
      ASSERT_EQ(mn[i], 0);
    }
  }
}

// bf16 (MPI has no such type: the mpi backend reduces 16-bit words with operations of its own).
// The values and their sums are exact in bf16, so any order of summation gives them.
TEST(Comm, Bf16ReductionsAndMoves) {
  Backend& w = world();
  const int d = w.size();
  for (size_t n : kCounts) {
    std::vector<c10::BFloat16> sum(n), mx(n), blocks(n * d), mine(n);
    for (size_t i = 0; i < n; ++i) sum[i] = mx[i] = value(w.rank(), i);
    for (size_t i = 0; i < n * d; ++i) blocks[i] = value(w.rank(), i);
    w.all_reduce(sum.data(), n, DType::BFloat16)->wait();
    w.all_reduce(mx.data(), n, DType::BFloat16, ReduceOp::Max)->wait();
    w.reduce_scatter(blocks.data(), mine.data(), n, DType::BFloat16)->wait();
    for (size_t i = 0; i < n; ++i) {
      float expect = 0, scattered = 0;
      for (int r = 0; r < d; ++r) {
        expect += value(r, i);
        scattered += value(r, w.rank() * n + i);
      }
      ASSERT_EQ(float(sum[i]), expect) << "n=" << n << " i=" << i;
      ASSERT_EQ(float(mx[i]), value(d - 1, i));
      ASSERT_EQ(float(mine[i]), scattered);
    }
    std::vector<c10::BFloat16> all(n * d);
    w.all_gather(mx.data(), all.data(), n, DType::BFloat16)->wait();
    for (int r = 0; r < d; ++r)
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(float(all[r * n + i]), value(d - 1, i));
  }
}

TEST(Comm, ReduceScatterAndAllGather) {
  Backend& w = world();
  int d = w.size();
  for (size_t n : kCounts) {
    std::vector<double> send(n * d), recv(n);
    for (size_t i = 0; i < send.size(); ++i) send[i] = w.rank() * 1000.0 + i;
    w.reduce_scatter(send.data(), recv.data(), n, DType::Float64)->wait();
    for (size_t i = 0; i < n; ++i) {
      double expect = 0;
      for (int r = 0; r < d; ++r) expect += r * 1000.0 + (w.rank() * n + i);
      ASSERT_DOUBLE_EQ(recv[i], expect);
    }
    std::vector<float> mine(n), all(n * d);
    for (size_t i = 0; i < n; ++i) mine[i] = value(w.rank(), i);
    w.all_gather(mine.data(), all.data(), n, DType::Float32)->wait();
    for (int r = 0; r < d; ++r)
      for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(all[r * n + i], value(r, i));
  }
}

// Max and Min scatter too (Gloo's reduce-scatter is loom's all-to-all and a local reduction).
TEST(Comm, ReduceScatterMaxAndMin) {
  Backend& w = world();
  const int d = w.size();
  for (size_t n : kCounts) {
    std::vector<int64_t> send(n * d), mx(n), mn(n);
    for (size_t i = 0; i < send.size(); ++i) send[i] = (w.rank() * 7 + int64_t(i)) % (d + 3);
    w.reduce_scatter(send.data(), mx.data(), n, DType::Int64, ReduceOp::Max)->wait();
    w.reduce_scatter(send.data(), mn.data(), n, DType::Int64, ReduceOp::Min)->wait();
    for (size_t i = 0; i < n; ++i) {
      int64_t hi = INT64_MIN, lo = INT64_MAX;
      for (int r = 0; r < d; ++r) {
        const int64_t v = (r * 7 + int64_t(w.rank() * n + i)) % (d + 3);
        hi = std::max(hi, v);
        lo = std::min(lo, v);
      }
      ASSERT_EQ(mx[i], hi) << "n=" << n << " i=" << i;
      ASSERT_EQ(mn[i], lo) << "n=" << n << " i=" << i;
    }
  }
}

// Block j of rank r's send buffer lands as block r of rank j's receive buffer.
TEST(Comm, AllToAllExchangesBlocks) {
  Backend& w = world();
  int d = w.size();
  for (size_t n : kCounts) {
    std::vector<float> send(n * d), recv(n * d, -1.f);
    for (int j = 0; j < d; ++j)
      for (size_t i = 0; i < n; ++i) send[j * n + i] = value(w.rank(), i) + 100.f * j;
    w.reset_stats();
    w.all_to_all(send.data(), recv.data(), n, DType::Float32)->wait();
    EXPECT_EQ(w.stats().bytes[int(OpKind::AllToAll)], uint64_t(d - 1) * n * 4);
    for (int r = 0; r < d; ++r)
      for (size_t i = 0; i < n; ++i)
        ASSERT_FLOAT_EQ(recv[r * n + i], value(r, i) + 100.f * w.rank()) << "n=" << n;
  }
  // Bytes (the quantized exchange of --dp-mode quant).
  std::vector<uint8_t> s8(3 * d), r8(3 * d);
  for (int j = 0; j < d; ++j)
    for (int i = 0; i < 3; ++i) s8[j * 3 + i] = static_cast<uint8_t>(16 * w.rank() + j + i);
  w.all_to_all(s8.data(), r8.data(), 3, DType::UInt8)->wait();
  for (int r = 0; r < d; ++r)
    for (int i = 0; i < 3; ++i) ASSERT_EQ(r8[r * 3 + i], 16 * r + w.rank() + i);
}

// Strings of any length, zero included: rank r sends rank j (r + 2 j) % 5 bytes, 16 r + j + i.
// Counted as one all-to-all of the bytes sent to others, plus the lengths' all-to-all.
TEST(Comm, AllToAllVExchangesStringsOfAnyLength) {
  Backend& w = world();
  const int d = w.size(), me = w.rank();
  auto length = [](int from, int to) { return static_cast<size_t>((from + 2 * to) % 5); };
  std::vector<std::vector<uint8_t>> out(d), in;
  std::vector<std::span<const uint8_t>> spans;
  uint64_t sent = 0;
  for (int j = 0; j < d; ++j) {
    for (size_t i = 0; i < length(me, j); ++i) out[j].push_back(uint8_t(16 * me + j + i));
    spans.emplace_back(out[j].data(), out[j].size());
    if (j != me) sent += out[j].size();
  }
  for (int round = 0; round < 2; ++round) {  // the second one reuses the receive buffers
    w.reset_stats();
    w.all_to_all_v(spans, in, 5)->wait();
    EXPECT_EQ(w.stats().bytes[int(OpKind::AllToAll)], sent + uint64_t(d - 1) * 8);
    ASSERT_EQ(in.size(), size_t(d));
    for (int r = 0; r < d; ++r) {
      ASSERT_EQ(in[r].size(), length(r, me)) << "from " << r;
      for (size_t i = 0; i < in[r].size(); ++i) ASSERT_EQ(in[r][i], 16 * r + me + i);
    }
  }
}

TEST(Comm, BroadcastFromEveryRoot) {
  Backend& w = world();
  for (size_t n : kCounts) {
    for (int root = 0; root < w.size(); ++root) {
      std::vector<int32_t> buf(n, w.rank() == root ? 42 + root : -1);
      w.broadcast(buf.data(), n, DType::Int32, root)->wait();
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(buf[i], 42 + root);
    }
  }
}

TEST(Comm, RingSendRecvNonBlocking) {
  Backend& w = world();
  if (w.size() == 1 && w.kind() != BackendKind::Mpi) GTEST_SKIP() << "gloo has no self-send";
  int d = w.size();
  for (size_t n : kCounts) {
    std::vector<float> out(n), in(n, -1.f);
    for (size_t i = 0; i < n; ++i) out[i] = value(w.rank(), i);
    int next = (w.rank() + 1) % d, prev = (w.rank() + d - 1) % d;
    // Receive posted first, send second: neither blocks the caller.
    auto r = w.recv(in.data(), n, DType::Float32, prev, 7);
    auto s = w.send(out.data(), n, DType::Float32, next, 7);
    s->wait();
    r->wait();
    for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(in[i], value(prev, i));
  }
  w.barrier()->wait();
}

// Checkpoint copies between hosts (train/host_copies.cpp) post messages while a thread of their
// own waits on the ones in flight (wait_thread.h): a ring of 20 messages each way, at most two
// of each in flight, the rank's own thread never waiting on a Work. MPI and Gloo move host
// memory themselves (host_world() is the world).
TEST(Comm, AWaitThreadWaitsWhileTheRankPostsMore) {
  Backend& w = world();
  EXPECT_EQ(&w.host_world(), &w);
  if (w.size() == 1 && w.kind() != BackendKind::Mpi) GTEST_SKIP() << "gloo has no self-send";
  const int d = w.size(), next = (w.rank() + 1) % d, prev = (w.rank() + d - 1) % d;
  constexpr size_t kMessages = 20, kWindow = 2, n = 4099;
  std::vector<std::vector<float>> out(kMessages, std::vector<float>(n)),
      in(kMessages, std::vector<float>(n, -1.f));
  for (size_t k = 0; k < kMessages; ++k)
    for (size_t i = 0; i < n; ++i) out[k][i] = value(w.rank(), i) + static_cast<float>(k);
  WaitThread sends, receives;
  size_t sent = 0, posted = 0;  // sends and receives posted
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const size_t s = sends.waited(), r = receives.waited();
    if (s == kMessages && r == kMessages) break;
    for (; posted < kMessages && posted - r < kWindow; ++posted)
      receives.add(w.recv(in[posted].data(), n, DType::Float32, prev, static_cast<int>(posted)));
    for (; sent < kMessages && sent - s < kWindow; ++sent)
      sends.add(w.send(out[sent].data(), n, DType::Float32, next, static_cast<int>(sent)));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "stuck: " << s << " sent, " << r << " received";
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  for (size_t k = 0; k < kMessages; ++k)
    for (size_t i = 0; i < n; i += 97)
      ASSERT_FLOAT_EQ(in[k][i], value(prev, i) + static_cast<float>(k)) << k << " " << i;
  w.barrier()->wait();
}

TEST(Comm, BytesCountedAsRing) {
  Backend& w = world();
  int d = w.size();
  w.reset_stats();
  std::vector<float> buf(1000, 1.f), out(1000 * d);
  w.all_reduce(buf.data(), 1000, DType::Float32)->wait();
  w.all_gather(buf.data(), out.data(), 1000, DType::Float32)->wait();
  w.reduce_scatter(out.data(), buf.data(), 1000, DType::Float32)->wait();
  Stats s = w.stats();
  EXPECT_EQ(s.calls[int(OpKind::AllReduce)], 1u);
  EXPECT_EQ(s.bytes[int(OpKind::AllReduce)], 2u * (d - 1) * 4000 / d);
  EXPECT_EQ(s.bytes[int(OpKind::AllGather)], uint64_t(d - 1) * 4000);
  EXPECT_EQ(s.bytes[int(OpKind::ReduceScatter)], uint64_t(d - 1) * 4000);
  EXPECT_EQ(s.total_calls(), 3u);
}

TEST(Comm, MeshGroupsFollowRankLayout) {
  Backend& w = world();
  int d = w.size();
  for (int pp = 1; pp <= d; ++pp) {
    if (d % pp) continue;
    int dp = d / pp;
    Mesh m = make_mesh(dp, pp);
    EXPECT_EQ(m.dp_comm->size(), dp);
    EXPECT_EQ(m.pp_comm->size(), pp);
    EXPECT_EQ(m.rank, m.pp_rank * dp + m.dp_rank);
    EXPECT_EQ(m.dp_comm->rank(), m.dp_rank);
    EXPECT_EQ(m.pp_comm->rank(), m.pp_rank);
    // Sum of world ranks over the DP group: consecutive ranks pp_rank*dp .. +dp-1.
    int64_t v = m.rank;
    m.dp_comm->all_reduce(&v, 1, DType::Int64)->wait();
    EXPECT_EQ(v, int64_t(m.pp_rank) * dp * dp + int64_t(dp) * (dp - 1) / 2);
  }
  EXPECT_THROW(make_mesh(d + 1, 1), loom::UsageError);
}

TEST(Comm, TimeoutNamesRankCommunicatorAndOperation) {
  // On a communicator of its own: a Gloo timeout closes the connections it timed out on.
  Backend& world_comm = world();
  if (world_comm.size() == 1 && world_comm.kind() != BackendKind::Mpi)
    GTEST_SKIP() << "gloo has no self-send";
  auto sub = world_comm.split(0, world_comm.rank(), "timeout-test");
  Backend& w = *sub;
  // Rank 0 receives what rank 1 (itself, alone) does not send yet: it must time out with a
  // useful message. Only rank 0 waits: a Gloo rank that times out closes its connections, so
  // a second rank timing out first would turn rank 0's timeout into "connection closed".
  const int from = 1 % w.size();
  float x = 0;
  WorkPtr r;
  if (w.rank() == 0) {
    Options quick;
    quick.timeout = std::chrono::milliseconds(200);
    r = w.recv(&x, 1, DType::Float32, from, 99, quick);
    try {
      r->wait();
      FAIL() << "expected a timeout";
    } catch (const loom::Error& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("[rank " + std::to_string(world_comm.rank()) + "]"), std::string::npos) << m;
      EXPECT_NE(m.find("communication timeout"), std::string::npos) << m;
      EXPECT_NE(m.find("recv"), std::string::npos) << m;
      EXPECT_NE(m.find("'timeout-test'"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
  }
  world_comm.barrier()->wait();
  if (w.kind() != BackendKind::Mpi) return;
  // MPI keeps the receive posted: complete it so the engine can shut down.
  float y = 3.f + w.rank();
  WorkPtr s;
  if (w.rank() == from) s = w.send(&y, 1, DType::Float32, 0, 99);
  if (r) r->wait();
  if (s) s->wait();
  if (w.rank() == 0) {
    EXPECT_FLOAT_EQ(x, 3.f + from);
  }
}

// Ranks that time-share the cores (CTest runs up to 4 on CI's 2): the MPI engine's thread asks
// for a long scheduler slice; with a core per rank it keeps the kernel's default.
TEST(Comm, EngineSliceFollowsCoreSharing) {
  Backend& w = world();
  if (w.kind() != BackendKind::Mpi) GTEST_SKIP() << "the MPI engine only";
  w.barrier()->wait();  // the engine thread has run
  const auto seen = Engine::instance().thread_slice();
  if (seen.count() == 0) GTEST_SKIP() << "this kernel reports no slice";
  const bool shared = w.size() > loom::usable_cores();  // every rank of a test on one machine
  if (shared)
    EXPECT_EQ(seen, std::chrono::milliseconds(10));
  else
    EXPECT_NE(seen, std::chrono::milliseconds(10));
}

// Transfers with ranks of this machine are quiet (the engine backs off longer while only
// such transfers are posted) exactly when Open MPI copies them once through shared memory;
// comm_tcp_np2 runs these tests over TCP, where they must not be.
TEST(Comm, PeersOnThisMachineAreQuietOnlyWithSingleCopy) {
  Backend& w = world();
  if (w.kind() != BackendKind::Mpi) GTEST_SKIP() << "the MPI engine only";
  const char* btl = std::getenv("OMPI_MCA_btl");
  const bool tcp = btl && std::string(btl) == "tcp,self";
  if (tcp) {
    EXPECT_FALSE(shared_memory_single_copy());
  }
  const bool quiet = shared_memory_single_copy();
  auto& m = dynamic_cast<MpiBackend&>(w);
  for (int r = 0; r < w.size(); ++r) EXPECT_EQ(m.quiet_peer(r), quiet) << "world rank " << r;
  // A split communicator maps its ranks to the world's.
  auto sub = w.split(0, w.size() - w.rank(), "reversed");  // the ranks in reverse order
  for (int r = 0; r < sub->size(); ++r)
    EXPECT_EQ(dynamic_cast<MpiBackend&>(*sub).quiet_peer(r), quiet) << "split rank " << r;
  EXPECT_FALSE(m.quiet_peer(w.size()));  // out of range
}

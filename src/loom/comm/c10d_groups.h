#pragma once
// Inside comm/ only: creating c10d process groups (gloo_group.cpp, nccl_group.cpp). Includes
// c10d headers, so only translation units that already use the precompiled torch header may
// include it.
#include <chrono>
#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace loom::comm {

c10::intrusive_ptr<c10d::Backend> make_gloo_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout,
                                                  const std::string& host);
c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store,
                                                  int rank, int size,
                                                  std::chrono::milliseconds timeout);
// Empty when NCCL groups can be made here; else why not.
std::string nccl_unavailable_reason();
// The GPU an NCCL group of this process moves: the current CUDA device (the rank's, made
// current before the communicators start).
at::Device nccl_device();

// Point-to-point tags above this one carry the block exchanges below, not the caller's messages.
constexpr int64_t kMaxUserTag = (int64_t{1} << 30) - 1;

// Block collectives of a Gloo group as point-to-point messages in chunks (gloo_blocks.cpp).
// Gloo delivers one large message of a pair while the pair's message the other way waits (2 MB
// each way take as long as 4 MB one way, measured on a shaped link, docs/multi-host.md), and
// its own reduce-scatter is an all-reduce: chunks let both directions of every link flow and
// move exactly a block collective's bytes. Each call numbers its chunks' tags on from where
// the last one stopped, so every member must post the same exchanges in the same order (as for
// any collective).
class BlockExchange {
 public:
  // Sends to[q] to each peer q and receives from[q] from it (the entries at this rank are left
  // alone); every block has the same number of elements. Returns the messages' works.
  std::vector<c10::intrusive_ptr<c10d::Work>> post(c10d::Backend& pg,
                                                   const std::vector<at::Tensor>& to,
                                                   const std::vector<at::Tensor>& from);

 private:
  int64_t next_ = 0;  // the next tag, counted above kMaxUserTag
};

}  // namespace loom::comm

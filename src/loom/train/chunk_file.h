#pragma once
// The bytes of one checkpoint file: the chunks of state_chunks.h (an index of names, ranges,
// replicas and shapes, then one tensor per chunk) and the writer's RNG state, as a torch
// archive (readable from Python with torch.jit.load).
#include <torch/torch.h>

#include <string>
#include <vector>

#include "loom/parallel/state_chunks.h"
#include "loom/train/checkpoint.h"

namespace loom::train {

std::string chunks_to_bytes(const std::vector<parallel::Chunk>& chunks, const torch::Tensor& rng);
// Adds the file's chunks to `set`; returns its RNG state (undefined when it has none).
// UsageError naming `file` when the bytes are not such a file.
torch::Tensor chunks_from_bytes(const std::string& bytes, const std::string& file,
                                parallel::ChunkSet& set, bool keep_replicas = true);

// What `e` says, on one line (a torch error's message without its C++ backtrace).
std::string exception_line(const std::exception& e);

// Reads files[i] of the checkpoint in `dir`, checks its size and CRC-32 against the manifest
// (UsageError naming the file otherwise), adds its chunks to `set` (without the per-replica
// ones unless keep_replicas) and returns its RNG state.
torch::Tensor read_checkpoint_file(const std::string& dir, const Manifest& m, size_t i,
                                   parallel::ChunkSet& set, bool keep_replicas = true);

}  // namespace loom::train

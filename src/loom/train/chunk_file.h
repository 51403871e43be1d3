#pragma once
// The bytes of one checkpoint file: the chunks of state_chunks.h (an index of names, ranges,
// replicas, shapes and dtypes, the CRC-32 of each MiB of elements, then each chunk's elements)
// and the writer's RNG state, as records of a zip (torch's PyTorchStreamWriter: uncompressed,
// 64-byte aligned, the zip's own CRC-32 fields 0; the records are listed in chunk_file.cpp;
// tests/cli/chunk_records.py reads them from Python). A reader reads the index and then only
// the elements it asks for, where the file holds them, checking each block it reads.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "loom/common/files.h"
#include "loom/parallel/state_chunks.h"
#include "loom/train/checkpoint.h"

namespace loom::train {

// What went into a file: its size, CRC-32 and the CRC-32 of its index (which holds the CRC-32
// of each MiB of each chunk's elements).
struct FileSum {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
  uint32_t index_crc32 = 0;
};
// Serializes `chunks` and `rng` onto `file` as the archive is produced (the whole file is never
// in memory; the caller commits it), and into `*keep` too when given. Error naming the file
// when a write fails.
FileSum write_chunks(AtomicFile& file, const std::vector<parallel::Chunk>& chunks,
                     const torch::Tensor& rng, std::string* keep = nullptr);

// What `e` says, on one line (a torch error's message without its C++ backtrace).
std::string exception_line(const std::exception& e);

// Reads files[i] of the checkpoint in `dir`, checks its size and, as `check` says, its
// CRC-32s against the manifest (UsageError naming the file otherwise, also from a later read
// of elements that do not match), adds its chunks to `set` (without the per-replica ones
// unless keep_replicas) and returns its RNG state (undefined when it has none). The chunks
// stay in the file (Chunk::stored, holding it open) until their elements are read; a file of
// format 1 (a torch archive, before 2026-12-07) is read whole. UsageError naming the file
// when it is not such a file.
torch::Tensor read_checkpoint_file(const std::string& dir, const Manifest& m, size_t i,
                                   parallel::ChunkSink& set, bool keep_replicas = true,
                                   FileCheck check = FileCheck::kWhatIsRead);

// The bytes this process has read from checkpoint files so far (elements, indexes, checks).
int64_t checkpoint_bytes_read();

}  // namespace loom::train

#pragma once
// A whole checkpoint in memory, every file checked against its manifest: what
// `loom checkpoint info` prints and `loom checkpoint convert` writes as one file.
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "loom/parallel/state_chunks.h"
#include "loom/train/checkpoint.h"

namespace loom::train {

struct CheckpointContents {
  Manifest manifest;
  std::string dir;  // the step folder
  // Every logical tensor whole, by (name, replica); replica -1: the same on every replica.
  std::map<std::pair<std::string, int>, parallel::Chunk> tensors;
};

// path: a step folder, or a checkpoint folder with `latest`. UsageError (one line) when a
// file is missing, damaged or incomplete. keep: the tensors wanted, by name (all without it);
// read file by file, each file's chunks copied into the tensors and dropped. check: every
// file whole (what `info` says), or only what the kept tensors need (chunk_file.h).
CheckpointContents read_whole_checkpoint(const std::string& path,
                                         const std::function<bool(const std::string&)>& keep = {},
                                         FileCheck check = FileCheck::kWholeFile);

// Writes <out>/consolidated.pt (every tensor whole) and <out>/manifest.json, which any layout
// can resume from (--resume <out>). UsageError when <out> holds files already.
void write_consolidated(const CheckpointContents& c, const std::string& out);

}  // namespace loom::train

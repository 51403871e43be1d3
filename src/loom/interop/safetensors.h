#pragma once
// The safetensors format of Hugging Face (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header size, a JSON header {name: {"dtype", "shape", "data_offsets": [begin,
// end]}, "__metadata__": {...}}, then the tensors' bytes. No C++ library of it is packaged;
// the format is small, and tests check these files against PyPI's safetensors.
#include <torch/torch.h>

#include <map>
#include <string>

namespace loom::interop {

// Writes float32 tensors (copied to the host, contiguous) durably and atomically. usage_fix:
// when set, a file that cannot be written is a UsageError ending in it (a path the user named).
void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& t,
                       const std::string& usage_fix = "");
// Reads every tensor as float32 (F32, BF16 and F16 are converted). UsageError (one line) when
// the file is missing, truncated, or holds another type.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);

}  // namespace loom::interop

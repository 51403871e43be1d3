#include "loom/interop/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/train/checkpoint.h"

namespace loom::interop {

void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& t) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  std::vector<torch::Tensor> data;
  int64_t offset = 0;
  for (const auto& [name, tensor] : t) {
    data.push_back(tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous());
    const int64_t bytes = data.back().numel() * 4;
    header[name] = {{"dtype", "F32"},
                    {"shape", data.back().sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string file(8, '\0');
  const uint64_t size = text.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  file += text;
  file.reserve(file.size() + offset);
  for (const auto& d : data)
    file.append(static_cast<const char*>(d.data_ptr()), static_cast<size_t>(d.numel()) * 4);
  write_file_atomic(path, file);
}

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  const std::string file = read_file(path);
  auto bad = [&](const std::string& why) {
    LOOM_USAGE("'", path, "' is not a safetensors file that loom reads (", why, ")");
  };
  if (file.size() < 8) bad("shorter than its header size");
  uint64_t size = 0;
  for (int i = 7; i >= 0; --i) size = (size << 8) | static_cast<unsigned char>(file[i]);
  if (size > file.size() - 8) bad("header beyond the end");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file.substr(8, size));
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("header: ") + e.what());
  }
  const size_t base = 8 + size;
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string dtype = entry.value("dtype", "");
    const auto type = dtype == "F32"    ? torch::kFloat32
                      : dtype == "BF16" ? torch::kBFloat16
                      : dtype == "F16"  ? torch::kFloat16
                                        : torch::kUInt8;
    if (type == torch::kUInt8) bad("tensor '" + name + "' is " + dtype);
    const std::vector<int64_t> shape = entry.at("shape").get<std::vector<int64_t>>();
    const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
    torch::Tensor t = torch::empty(shape, type);
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    if (offsets.size() != 2 || offsets[1] - offsets[0] != bytes || base + offsets[1] > file.size())
      bad("tensor '" + name + "' has data_offsets that do not fit its shape or the file");
    std::memcpy(t.data_ptr(), file.data() + base + offsets[0], bytes);
    out[name] = t.to(torch::kFloat32);
  }
  return out;
}

}  // namespace loom::interop

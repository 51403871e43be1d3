#include "loom/interop/safetensors.h"

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/text.h"
#include "loom/train/checkpoint.h"

namespace loom::interop {

void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& t,
                       const std::string& usage_fix) {
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
  write_file_atomic(path, file, usage_fix);
}

namespace {

// A header's dtype -> torch's, or kUInt8 for one loom does not read.
torch::ScalarType dtype_of(const nlohmann::json& v) {
  const std::string dtype = v.is_string() ? v.get<std::string>() : "";
  return dtype == "F32"    ? torch::kFloat32
         : dtype == "BF16" ? torch::kBFloat16
         : dtype == "F16"  ? torch::kFloat16
                           : torch::kUInt8;
}

// Every entry is checked against the file before anything is allocated: a damaged or hostile
// header can name any shape and offsets (a shape of 2^60 elements, offsets that wrap).
struct Entry {
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, bytes = 0;
};

Entry entry_of(const std::string& name, const nlohmann::json& e, uint64_t data_bytes,
               const std::function<void(const std::string&)>& bad) {
  const std::string tensor = "tensor " + text::quote(name);
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    bad(tensor + " lacks dtype, shape or data_offsets");
  Entry out;
  out.type = dtype_of(e.at("dtype"));
  if (out.type == torch::kUInt8)
    bad(tensor + " is " + text::escape(e.at("dtype").dump()) + "; loom reads F32, BF16 and F16");
  const uint64_t element = torch::elementSize(out.type);
  const nlohmann::json& shape = e.at("shape");
  if (!shape.is_array()) bad(tensor + " has a shape that is not a list");
  uint64_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) bad(tensor + " has a shape that is not of sizes >= 0");
    const uint64_t size = d.get<uint64_t>();
    if (size != 0 && numel > data_bytes / element / size)
      bad(tensor + " has a shape larger than the file");
    numel *= size;
    out.shape.push_back(static_cast<int64_t>(size));
  }
  out.bytes = numel * element;
  const nlohmann::json& offsets = e.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    bad(tensor + " has data_offsets that are not two sizes");
  out.begin = offsets[0].get<uint64_t>();
  const uint64_t end = offsets[1].get<uint64_t>();
  if (out.begin > end || end > data_bytes || end - out.begin != out.bytes)
    bad(tensor + " has data_offsets that do not fit its shape or the file");
  return out;
}

}  // namespace

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  const std::string file = read_file(path);
  const std::function<void(const std::string&)> bad = [&](const std::string& why) {
    LOOM_USAGE(text::quote(path), " is not a safetensors file that loom reads (", why, ")");
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
  if (!header.is_object()) bad("its header is not a JSON object");
  const size_t base = 8 + size;
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    const Entry entry = entry_of(name, e, file.size() - base, bad);
    torch::Tensor t = torch::empty(entry.shape, entry.type);
    std::memcpy(t.data_ptr(), file.data() + base + entry.begin, entry.bytes);
    out[name] = t.to(torch::kFloat32);
  }
  return out;
}

}  // namespace loom::interop

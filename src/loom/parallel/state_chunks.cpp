#include "loom/parallel/state_chunks.h"

#include <algorithm>
#include <cstdio>

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// How far from `begin` the chunks (sorted by begin) cover [begin, begin + count) without a
// gap; with `out` (count elements), copies what they hold of it there.
int64_t fill(const std::vector<Chunk>& chunks, int64_t begin, int64_t count,
             torch::Tensor* out = nullptr) {
  const int64_t stop = begin + count;
  int64_t pos = begin;
  for (const Chunk& c : chunks) {
    if (pos >= stop) break;
    const int64_t end = c.begin + c.numel();
    if (c.begin > pos) break;  // a gap
    if (end <= pos) continue;  // wholly before (a duplicate from another file)
    const int64_t to = std::min(end, stop);
    if (out) c.read(pos - c.begin, out->slice(0, pos - begin, to - begin));
    pos = to;
  }
  return pos - begin;
}

}  // namespace

namespace {

// `data` as a chunk's flat tensor: on the CPU, exactly its storage; a copy unless `borrow`.
torch::Tensor flat_of(const torch::Tensor& data, bool borrow) {
  torch::Tensor flat = data.detach().reshape({-1});
  if (!flat.is_cpu()) return flat.to(torch::kCPU);
  if (!borrow) return flat.clone();
  if (flat.storage_offset() == 0 && flat.storage().nbytes() == static_cast<size_t>(flat.nbytes()))
    return flat;
  // A file stores a tensor's whole storage: a piece of a larger one (a ZeRO shard's slice, one
  // of a flat buffer's parameters) becomes a tensor over exactly its memory, holding the
  // larger one alive until it is written.
  return torch::from_blob(
      flat.data_ptr(), {flat.numel()}, [keep = flat](void*) {}, flat.options());
}

}  // namespace

void ChunkWriter::put(const std::string& name, int replica, int64_t begin,
                      std::vector<int64_t> shape, const torch::Tensor& data) {
  add(name, replica, begin, std::move(shape), flat_of(data, borrow_));
}

void ChunkWriter::put_copy(const std::string& name, int replica, int64_t begin,
                           std::vector<int64_t> shape, const torch::Tensor& data) {
  add(name, replica, begin, std::move(shape), flat_of(data, /*borrow=*/false));
}

void ChunkWriter::add(const std::string& name, int replica, int64_t begin,
                      std::vector<int64_t> shape, torch::Tensor flat) {
  LOOM_CHECK(begin >= 0 && begin + flat.numel() <= numel_of(shape), "chunk of '", name,
             "' outside its tensor");
  chunks_.push_back({name, replica, begin, std::move(shape), std::move(flat)});
}

void Chunk::read(int64_t at, const torch::Tensor& out) const {
  if (!data.defined()) return stored->read(at, out);
  out.copy_(data.slice(0, at, at + out.numel()));
}

bool ChunkReader::has(const std::string& name, int replica) const {
  torch::Tensor none = torch::empty({0});
  return get(name, replica, 0, none);
}

void ChunkSet::add(Chunk c) {
  auto& v = by_key_[{c.name, c.replica}];
  if (!v.empty() && v.front().shape != c.shape)
    LOOM_USAGE("checkpoint holds tensor '", c.name, "' in two different shapes; it is corrupt");
  auto at = std::upper_bound(v.begin(), v.end(), c.begin,
                             [](int64_t b, const Chunk& x) { return b < x.begin; });
  v.insert(at, std::move(c));
  ++count_;
}

const std::vector<Chunk>* ChunkSet::find(const std::string& name, int replica) const {
  auto it = by_key_.find({name, replica});
  if (it == by_key_.end() && replica != -1) it = by_key_.find({name, -1});
  return it == by_key_.end() ? nullptr : &it->second;
}

bool ChunkSet::covers(const std::string& name, int replica, int64_t begin, int64_t count) const {
  const std::vector<Chunk>* v = find(name, replica);
  return v && fill(*v, begin, count) == count;
}

const std::vector<int64_t>* ChunkSet::shape(const std::string& name, int replica) const {
  const std::vector<Chunk>* v = find(name, replica);
  return v ? &v->front().shape : nullptr;
}

bool ChunkSet::get(const std::string& name, int replica, int64_t begin, torch::Tensor out) const {
  const std::vector<Chunk>* v = find(name, replica);
  if (!v) return false;
  LOOM_CHECK(out.dim() == 1 && out.is_contiguous(), "ChunkSet::get wants a flat tensor");
  const int64_t total = numel_of(v->front().shape);
  if (begin < 0 || begin + out.numel() > total)
    LOOM_USAGE("checkpoint tensor '", name, "' has ", total, " elements, this run needs [", begin,
               ", ", begin + out.numel(), "); the model differs from the checkpoint's");
  const int64_t got = fill(*v, begin, out.numel(), &out);
  if (got != out.numel())
    LOOM_USAGE("checkpoint lacks elements [", begin + got, ", ", begin + out.numel(), ") of '",
               name, "'", replica >= 0 ? detail::concat(" (replica ", replica, ")") : "",
               "; a rank file is missing from it");
  return true;
}

ChunkName parse_chunk_name(const std::string& name) {
  ChunkName n;
  const size_t slash = name.find('/');
  if (slash == std::string::npos) {
    n.key = name;
    return n;
  }
  n.key = name.substr(0, slash);
  const size_t hash = name.find("#tp", slash);
  n.param = name.substr(slash + 1, hash == std::string::npos ? hash : hash - slash - 1);
  if (hash != std::string::npos &&
      std::sscanf(name.c_str() + hash, "#tp%dof%d", &n.part, &n.parts) != 2) {
    n.part = -1;
    n.parts = 1;
  }
  return n;
}

void ChunkFilter::want_range(const std::string& name, int64_t begin, int64_t end) {
  ranged_keys_.insert(parse_chunk_name(name).key);
  if (begin >= end) return;
  auto& v = ranges_[name];
  v.emplace_back(begin, end);
  std::sort(v.begin(), v.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& r : v) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  v = std::move(merged);
}

void ChunkFilter::want_param(const std::string& param) {
  params_.insert(param);
}

void ChunkFilter::add(Chunk c) {
  const ChunkName n = parse_chunk_name(c.name);
  if (n.param.empty()) return to_.add(std::move(c));
  auto r = ranges_.find(c.name);
  if (r == ranges_.end()) {
    if (!ranged_keys_.count(n.key) && params_.count(n.param)) to_.add(std::move(c));
    return;
  }
  const int64_t end = c.begin + c.numel();
  for (const auto& [b, e] : r->second) {
    const int64_t from = std::max(b, c.begin), to = std::min(e, end);
    if (from >= to) continue;
    // Whole: wanted as it is, or still in its file (where what is not asked is never read).
    if ((from == c.begin && to == end) || !c.data.defined()) return to_.add(std::move(c));
    // A copy: a view would hold the whole chunk's memory, the file's.
    to_.add(
        {c.name, c.replica, from, c.shape, c.data.slice(0, from - c.begin, to - c.begin).clone()});
  }
}

void WholeTensors::add(Chunk c) {
  if (keep_ && !keep_(c.name)) return;
  auto [it, fresh] = wholes_.try_emplace({c.name, c.replica});
  Whole& w = it->second;
  if (fresh)
    w.tensor = {c.name, c.replica, 0, c.shape,
                torch::empty({numel_of(c.shape)}, torch::TensorOptions().dtype(c.dtype()))};
  else if (w.tensor.shape != c.shape)
    LOOM_USAGE("checkpoint holds tensor '", c.name, "' in two different shapes; it is corrupt");
  const int64_t end = c.begin + c.numel();
  if (c.begin < 0 || end > w.tensor.data.numel())
    LOOM_USAGE("checkpoint holds elements [", c.begin, ", ", end, ") of '", c.name, "', which has ",
               w.tensor.data.numel(), "; it is corrupt");
  c.read(0, w.tensor.data.slice(0, c.begin, end));
  w.held.emplace_back(c.begin, end);
}

std::map<std::pair<std::string, int>, Chunk> WholeTensors::take() {
  std::map<std::pair<std::string, int>, Chunk> out;
  for (auto& [key, w] : wholes_) {
    std::sort(w.held.begin(), w.held.end());
    const int64_t total = w.tensor.data.numel();
    int64_t pos = 0;  // every element before it held
    auto next = w.held.begin();
    for (; next != w.held.end() && next->first <= pos; ++next) pos = std::max(pos, next->second);
    if (pos != total)
      LOOM_USAGE("checkpoint lacks elements [", pos, ", ",
                 next == w.held.end() ? total : next->first, ") of '", key.first, "'",
                 key.second >= 0 ? detail::concat(" (replica ", key.second, ")") : "",
                 "; a rank file is missing from it");
    out.emplace(key, std::move(w.tensor));
  }
  wholes_.clear();
  return out;
}

}  // namespace loom::parallel

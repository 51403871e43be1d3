#pragma once
// Checkpoint state that does not depend on the layout that wrote it (resharding): every value
// a stage keeps (parameters, optimizer moments, a mode's own state) is written as chunks of
// logical tensors named after the model's parameters ("param/blocks.3.qkv.weight",
// "adamw.exp_avg/blocks.3.qkv.weight"). A chunk is a range of the flattened tensor, so a
// ZeRO shard that cuts through parameters writes pieces of several, and a reader under any
// other dp x pp x loops x dp-mode asks for exactly the ranges it holds.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace loom::parallel {

// A chunk's elements still in its file, read when asked (train/chunk_file.h).
class StoredElements {
 public:
  virtual ~StoredElements() = default;
  virtual int64_t numel() const = 0;
  virtual torch::ScalarType dtype() const = 0;
  // Elements [at, at + out.numel()) into `out` (1-D, contiguous, on any device; converted to
  // its dtype).
  virtual void read(int64_t at, const torch::Tensor& out) const = 0;
};

// Elements [begin, begin + numel()) of the flattened logical tensor `name` (of `shape`),
// as replica `replica` of the data-parallel group holds them; -1: the same on every replica.
struct Chunk {
  std::string name;
  int replica = -1;
  int64_t begin = 0;
  std::vector<int64_t> shape;
  torch::Tensor data;  // 1-D, contiguous, on the CPU, exactly its storage (what a file holds)
  // Instead of `data` (undefined then): the elements where a file holds them.
  std::shared_ptr<const StoredElements> stored{};

  int64_t numel() const { return data.defined() ? data.numel() : stored->numel(); }
  torch::ScalarType dtype() const { return data.defined() ? data.scalar_type() : stored->dtype(); }
  // Its elements [at, at + out.numel()) into `out` (1-D, contiguous), from memory or the file.
  void read(int64_t at, const torch::Tensor& out) const;
};

class ChunkWriter {
 public:
  // borrow: `put` keeps CPU tensors' memory instead of copying it (a synchronous save, whose
  // state does not change until its chunks are written); otherwise every chunk is a copy.
  explicit ChunkWriter(bool borrow = false) : borrow_(borrow) {}
  // `data` (any shape; its elements in order), copied or borrowed.
  void put(const std::string& name, int replica, int64_t begin, std::vector<int64_t> shape,
           const torch::Tensor& data);
  // Like put(), but always copied: `data`'s memory is valid only during the call (a tensor
  // over a buffer it does not own).
  void put_copy(const std::string& name, int replica, int64_t begin, std::vector<int64_t> shape,
                const torch::Tensor& data);
  std::vector<Chunk>& chunks() { return chunks_; }

 private:
  void add(const std::string& name, int replica, int64_t begin, std::vector<int64_t> shape,
           torch::Tensor flat);

  bool borrow_;
  std::vector<Chunk> chunks_;
};

class ChunkReader {
 public:
  virtual ~ChunkReader() = default;
  // Fills `out` with elements [begin, begin + out.numel()) of `name` as `replica` holds them
  // (chunks of replica -1 serve every replica). false when there is no chunk of that tensor;
  // UsageError when there are chunks but they leave part of the range uncovered.
  virtual bool get(const std::string& name, int replica, int64_t begin,
                   torch::Tensor out) const = 0;
  bool has(const std::string& name, int replica) const;
};

// Where a checkpoint file's chunks go as it is read.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual void add(Chunk c) = 0;
};

// Chunks, in memory or still in their files (read where a get() asks).
class ChunkSet : public ChunkReader, public ChunkSink {
 public:
  void add(Chunk c) override;
  bool get(const std::string& name, int replica, int64_t begin, torch::Tensor out) const override;
  // Like get(), but false (instead of UsageError) when the range is not fully covered.
  bool covers(const std::string& name, int replica, int64_t begin, int64_t count) const;
  // The shape of a tensor it holds chunks of; nullptr when it holds none.
  const std::vector<int64_t>* shape(const std::string& name, int replica) const;
  size_t size() const { return count_; }

 private:
  const std::vector<Chunk>* find(const std::string& name, int replica) const;
  std::map<std::pair<std::string, int>, std::vector<Chunk>> by_key_;  // sorted by begin
  size_t count_ = 0;
};

// The parts of a chunk's name: "<key>/<param>[#tp<part>of<parts>]" ("adamw.exp_avg/blocks.3.qkv
// .weight#tp1of2": part 1 of 2 of a tensor-parallel split); key is the whole name and param
// empty for a name without '/' ("optimizer.step"); part -1 for a whole parameter.
struct ChunkName {
  std::string key, param;
  int part = -1, parts = 1;
};
ChunkName parse_chunk_name(const std::string& name);

// Passes on only the chunks a reader will ask for, as a checkpoint file's chunks arrive, so
// that a rank resuming under another layout keeps its own stages' state and not every file's
// it read: of a tensor whose elements it names ranges of (the pieces of a ZeRO shard), only
// those elements (of a chunk in memory, a copy: the file's memory goes with the file; a chunk
// still in its file passes whole, since only what is asked is read); every tensor of a
// parameter it names under any other key, whole; names without a key always. Nothing else.
class ChunkFilter : public ChunkSink {
 public:
  explicit ChunkFilter(ChunkSink& to) : to_(to) {}
  // Elements [begin, end) of `name`; any other tensor of its key is then not wanted.
  void want_range(const std::string& name, int64_t begin, int64_t end);
  // Every tensor of parameter `param` (any tensor-parallel part) under a key with no ranges.
  void want_param(const std::string& param);
  void add(Chunk c) override;

 private:
  ChunkSink& to_;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> ranges_;  // sorted, disjoint
  std::set<std::string> ranged_keys_, params_;
};

// Logical tensors made whole as their chunks arrive (each chunk copied into place and
// dropped: what they take is the tensors' size, whatever the files), keeping those whose name
// `keep` accepts (all without it).
class WholeTensors : public ChunkSink {
 public:
  explicit WholeTensors(std::function<bool(const std::string&)> keep = {})
      : keep_(std::move(keep)) {}
  // UsageError when a chunk contradicts an earlier one's shape or lies outside its tensor.
  void add(Chunk c) override;
  // Every tensor kept, by (name, replica); UsageError naming the first part of one that no
  // chunk held.
  std::map<std::pair<std::string, int>, Chunk> take();

 private:
  struct Whole {
    Chunk tensor;                                   // begin 0, every element
    std::vector<std::pair<int64_t, int64_t>> held;  // [begin, end) of the chunks copied in
  };
  std::function<bool(const std::string&)> keep_;
  std::map<std::pair<std::string, int>, Whole> wholes_;
};

}  // namespace loom::parallel

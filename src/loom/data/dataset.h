#pragma once
// Datasets in plain memory, with no libtorch dependency (the trainer wraps arrays as tensors).
// Which samples a step uses depends only on (seed, step, global batch): see sampler.h.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::data {

enum class ElemType { Float32, Int64 };

struct Array {
  ElemType type = ElemType::Float32;
  std::vector<int64_t> shape;
  std::vector<float> f32;    // used when type == Float32
  std::vector<int64_t> i64;  // used when type == Int64
  int64_t numel() const;
};

struct Batch {
  Array input;   // images [n,1,28,28] float in [0,1]; or tokens [n,T] int64
  Array target;  // labels [n] int64; or next tokens [n,T] int64
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Gathers the samples with the given indices (each in [0, size())) into one batch.
  virtual Batch get(std::span<const int64_t> indices) const = 0;
  virtual std::string describe() const = 0;  // e.g. "fashion-mnist train: 60000 images 28x28"
  // Text: the bytes of the split per token (1 for bytes; more with a tokenizer), which turns a
  // loss per token into one per byte. 0 for other data.
  virtual double bytes_per_token() const { return 0; }
};

enum class Split { Train, Test };

// Fashion-MNIST (or MNIST) from gzipped (or plain) IDX files in `dir`:
// train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-*. Pixels scaled to [0,1].
// Throws loom::UsageError naming the file and the problem (missing, truncated, bad magic,
// image/label count mismatch, label out of range) and the fix (e.g. the package to install).
std::unique_ptr<Dataset> open_idx_images(const std::string& dir, Split split);

// Text: a file, or every regular file under a folder (text_files.h), as bytes (tokenizer "")
// or as the ids of the SentencePiece model `tokenizer` (tokenized once: token_cache.h).
// Sample i is the window of seq_len + 1 tokens starting at token i * seq_len; input = first
// seq_len tokens, target = last seq_len. Split::Test is the last `test_fraction` of the bytes
// (with a tokenizer: from the line end nearest to that point), Train the rest.
// Throws loom::UsageError when missing or too short for one sample.
std::unique_ptr<Dataset> open_text(const std::string& path, int64_t seq_len, Split split,
                                   double test_fraction = 0.05, const std::string& tokenizer = "");

// Deterministic synthetic data; sample i depends only on (seed, i).
//  classification: inputs [n, features...] float ~ N(0,1), labels = argmax of a fixed random
//                  linear teacher (seeded), so the task is learnable.
//  tokens: random tokens in [0, vocab) of length seq_len + 1 with a simple learnable pattern.
std::unique_ptr<Dataset> synthetic_classification(std::vector<int64_t> sample_shape,
                                                  int64_t classes, int64_t size, uint64_t seed);
std::unique_ptr<Dataset> synthetic_tokens(int64_t vocab, int64_t seq_len, int64_t size,
                                          uint64_t seed);

}  // namespace loom::data

// Synthetic datasets: every sample is regenerated from (seed, index), so nothing is stored
// per sample and any rank can produce any sample.
#include <numeric>

#include "loom/common/error.h"
#include "loom/data/dataset.h"
#include "loom/data/rng.h"

namespace loom::data {
namespace {

// Streams for per-dataset parameters; sample streams use the index itself (>= 0).
constexpr uint64_t kTeacherStream = ~uint64_t{0};
constexpr uint64_t kPatternStream = ~uint64_t{0} - 1;

uint64_t sample_state(uint64_t seed, int64_t i) {
  return detail::mix_seed(seed, static_cast<uint64_t>(i));
}

void check_index(int64_t i, int64_t n) {
  LOOM_CHECK(i >= 0 && i < n, "sample index ", i, " outside [0, ", n, ")");
}

class SyntheticClassification : public Dataset {
 public:
  SyntheticClassification(std::vector<int64_t> sample_shape, int64_t classes, int64_t size,
                          uint64_t seed)
      : shape_(std::move(sample_shape)), classes_(classes), n_(size), seed_(seed) {
    features_ = 1;
    for (int64_t d : shape_) features_ *= d;
    uint64_t state = detail::mix_seed(seed_, kTeacherStream);
    teacher_.resize(classes_ * features_);
    for (float& w : teacher_) w = detail::normal(state);
  }

  int64_t size() const override { return n_; }

  Batch get(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    Batch b;
    b.input.type = ElemType::Float32;
    b.input.shape = {n};
    b.input.shape.insert(b.input.shape.end(), shape_.begin(), shape_.end());
    b.input.f32.resize(n * features_);
    b.target.type = ElemType::Int64;
    b.target.shape = {n};
    b.target.i64.resize(n);
    for (int64_t k = 0; k < n; ++k) {
      check_index(indices[k], n_);
      uint64_t state = sample_state(seed_, indices[k]);
      float* x = b.input.f32.data() + k * features_;
      for (int64_t f = 0; f < features_; ++f) x[f] = detail::normal(state);
      // Label = argmax of the teacher's logits (double sums: same answer at any batch size).
      int64_t best = 0;
      double best_logit = 0;
      for (int64_t c = 0; c < classes_; ++c) {
        const float* w = teacher_.data() + c * features_;
        double logit = 0;
        for (int64_t f = 0; f < features_; ++f) logit += double{w[f]} * x[f];
        if (c == 0 || logit > best_logit) {
          best = c;
          best_logit = logit;
        }
      }
      b.target.i64[k] = best;
    }
    return b;
  }

  std::string describe() const override {
    std::string shape;
    for (int64_t d : shape_) {
      if (!shape.empty()) shape += 'x';
      shape += std::to_string(d);
    }
    return "synthetic classification: " + std::to_string(n_) + " samples " + shape + ", " +
           std::to_string(classes_) + " classes, seed " + std::to_string(seed_);
  }

 private:
  std::vector<int64_t> shape_;
  int64_t classes_;
  int64_t n_;
  uint64_t seed_;
  int64_t features_;
  std::vector<float> teacher_;  // [classes, features]
};

// Sequences that follow t' = (a * t + b) mod vocab from a random start, with a few random
// tokens mixed in; the rule continues from the noisy token, so next-token prediction only
// needs the current token and is learnable up to the noise rate.
class SyntheticTokens : public Dataset {
 public:
  static constexpr double kNoise = 0.05;

  SyntheticTokens(int64_t vocab, int64_t seq_len, int64_t size, uint64_t seed)
      : vocab_(vocab), seq_len_(seq_len), n_(size), seed_(seed) {
    uint64_t state = detail::mix_seed(seed_, kPatternStream);
    const auto v = static_cast<uint64_t>(vocab_);
    do {  // a coprime with vocab makes the rule a permutation of the tokens
      a_ = 1 + static_cast<int64_t>(detail::uniform_below(state, v - 1));
    } while (std::gcd(a_, vocab_) != 1);
    b_ = 1 + static_cast<int64_t>(detail::uniform_below(state, v - 1));
  }

  int64_t size() const override { return n_; }

  Batch get(std::span<const int64_t> indices) const override {
    const auto n = static_cast<int64_t>(indices.size());
    const int64_t len = seq_len_ + 1;
    Batch b;
    for (Array* arr : {&b.input, &b.target}) {
      arr->type = ElemType::Int64;
      arr->shape = {n, seq_len_};
      arr->i64.resize(n * seq_len_);
    }
    std::vector<int64_t> seq(len);
    const auto v = static_cast<uint64_t>(vocab_);
    for (int64_t k = 0; k < n; ++k) {
      check_index(indices[k], n_);
      uint64_t state = sample_state(seed_, indices[k]);
      seq[0] = static_cast<int64_t>(detail::uniform_below(state, v));
      for (int64_t t = 1; t < len; ++t) {
        seq[t] = detail::uniform01(state) < kNoise
                     ? static_cast<int64_t>(detail::uniform_below(state, v))
                     : (a_ * seq[t - 1] + b_) % vocab_;
      }
      std::copy(seq.begin(), seq.end() - 1, b.input.i64.begin() + k * seq_len_);
      std::copy(seq.begin() + 1, seq.end(), b.target.i64.begin() + k * seq_len_);
    }
    return b;
  }

  std::string describe() const override {
    return "synthetic tokens: " + std::to_string(n_) + " samples of " + std::to_string(seq_len_) +
           " tokens, vocab " + std::to_string(vocab_) + ", seed " + std::to_string(seed_);
  }

 private:
  int64_t vocab_;
  int64_t seq_len_;
  int64_t n_;
  uint64_t seed_;
  int64_t a_ = 1;
  int64_t b_ = 1;
};

}  // namespace

std::unique_ptr<Dataset> synthetic_classification(std::vector<int64_t> sample_shape,
                                                  int64_t classes, int64_t size, uint64_t seed) {
  if (sample_shape.empty()) LOOM_USAGE("synthetic: the sample shape must not be empty");
  for (int64_t d : sample_shape) {
    if (d < 1) LOOM_USAGE("synthetic: sample shape dimensions must be positive (got ", d, ")");
  }
  if (classes < 2) LOOM_USAGE("synthetic: classes must be at least 2 (got ", classes, ")");
  if (size < 1) LOOM_USAGE("synthetic: size must be at least 1 (got ", size, ")");
  return std::make_unique<SyntheticClassification>(std::move(sample_shape), classes, size, seed);
}

std::unique_ptr<Dataset> synthetic_tokens(int64_t vocab, int64_t seq_len, int64_t size,
                                          uint64_t seed) {
  if (vocab < 2) LOOM_USAGE("synthetic: vocab must be at least 2 (got ", vocab, ")");
  if (seq_len < 1) LOOM_USAGE("synthetic: seq_len must be at least 1 (got ", seq_len, ")");
  if (size < 1) LOOM_USAGE("synthetic: size must be at least 1 (got ", size, ")");
  return std::make_unique<SyntheticTokens>(vocab, seq_len, size, seed);
}

}  // namespace loom::data

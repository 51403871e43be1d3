// Small Fashion-MNIST classifiers (inputs [b, 1, 28, 28]).
#include "loom/model/linear_uses.h"
#include "loom/model/model.h"

namespace loom::model {
namespace {

// Linear (+ ReLU unless it is the output layer); flattens its input first.
class Dense : public Block {
 public:
  Dense(int64_t in, int64_t out, bool relu) : in_(in), out_(out), relu_(relu) {
    fc_ = register_module("fc", torch::nn::Linear(in, out));
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    auto y = apply_linear(x.flatten(1), fc_);
    return relu_ ? torch::relu(y) : y;
  }
  double flops_per_sample() const override { return 2.0 * in_ * out_; }
  std::string kind() const override { return "dense"; }

 private:
  int64_t in_, out_;
  bool relu_;
  torch::nn::Linear fc_{nullptr};
};

// 3x3 convolution (same padding) + ReLU + 2x2 max-pool.
class ConvPool : public Block {
 public:
  ConvPool(int64_t in, int64_t out, int64_t size) : in_(in), out_(out), size_(size) {
    conv_ =
        register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1)));
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    return torch::max_pool2d(torch::relu(conv_(x)), 2);
  }
  double flops_per_sample() const override { return 2.0 * 9 * in_ * out_ * size_ * size_; }
  std::string kind() const override { return "conv"; }

 private:
  int64_t in_, out_, size_;
  torch::nn::Conv2d conv_{nullptr};
};

}  // namespace

Model build_mlp(const config::ModelConfig& c) {
  Model m;
  m.name = "mlp";
  m.classifier = true;
  int64_t in = 28 * 28;
  for (int64_t i = 0; i < c.layers; ++i) {
    m.blocks.push_back(std::make_shared<Dense>(in, c.width, true));
    in = c.width;
  }
  m.blocks.push_back(std::make_shared<Dense>(in, c.classes, false));
  return m;
}

Model build_cnn(const config::ModelConfig& c) {
  Model m;
  m.name = "cnn";
  m.classifier = true;
  m.blocks.push_back(std::make_shared<ConvPool>(1, 16, 28));
  m.blocks.push_back(std::make_shared<ConvPool>(16, 32, 14));
  m.blocks.push_back(std::make_shared<Dense>(32 * 7 * 7, 128, true));
  m.blocks.push_back(std::make_shared<Dense>(128, c.classes, false));
  return m;
}

}  // namespace loom::model

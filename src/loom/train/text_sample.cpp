#include "loom/train/text_sample.h"

#include <ATen/CPUGeneratorImpl.h>

#include "loom/data/tokenizer.h"
#include "loom/model/generate.h"

namespace loom::train {
namespace {

// Control characters as escapes (\n, \x07): a sample is one line of the log.
std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char ch : text) {
    if (ch == '\n') {
      out += "\\n";
    } else if (ch < 0x20 || ch == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += {'\\', 'x', hex[ch >> 4], hex[ch & 15]};
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out;
}

}  // namespace

std::string sample_text(const SampleContext& c, int64_t step) {
  constexpr int64_t kNewTokens = 48;
  const auto tokenizer = data::open_tokenizer(c.cfg->data.tokenizer);
  std::vector<int64_t> tokens = tokenizer->encode("The ");
  const int64_t seq_len = c.cfg->model.seq_len;
  const comm::Mesh& mesh = *c.mesh;
  // The rank with the last stage (pp rank pp - 1 when looping, 0 in V placement), replica 0,
  // tp rank 0.
  const schedule::Shape& shape = c.exec->shape();
  const int chooser = mesh.world_rank(shape.rank_of(shape.stages() - 1), 0, 0);
  model::SampleOptions o;
  o.temperature = 0.8;
  o.top_k = 40;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(c.cfg->train.seed + step);
  torch::NoGradGuard no_grad;
  const size_t prompt = tokens.size();
  while (int64_t(tokens.size()) < std::min<int64_t>(seq_len, int64_t(prompt) + kNewTokens)) {
    // Every micro-batch row holds the text so far, padded: causal attention keeps the padding
    // out of the positions that matter.
    std::vector<torch::Tensor> inputs;
    if (c.first_stage) {
      torch::Tensor row = torch::zeros({seq_len}, torch::kInt64);
      row.slice(0, 0, int64_t(tokens.size())).copy_(torch::tensor(tokens, torch::kInt64));
      const torch::Tensor batch = row.unsqueeze(0).expand({c.micro_batch, seq_len}).contiguous();
      for (int j = 0; j < c.m; ++j) inputs.push_back(batch.to(c.device));
    }
    const std::vector<torch::Tensor> logits = c.exec->run_forward(inputs, c.m);
    int64_t next = 0;
    if (c.last_stage && mesh.dp_rank == 0) {
      torch::Tensor last = logits.at(0)[0][int64_t(tokens.size()) - 1].contiguous();
      if (mesh.tp > 1) {  // this rank's part of the vocabulary: gather the whole
        torch::Tensor whole = torch::empty({last.numel() * mesh.tp}, last.options());
        mesh.tp_comm->all_gather(last, whole)->wait();
        last = whole;
      }
      if (c.world->rank() == chooser) next = model::choose_token(last, o, gen);
    }
    c.world->broadcast(&next, 1, comm::DType::Int64, chooser)->wait();
    tokens.push_back(next);
  }
  return c.world->rank() == 0 ? printable(tokenizer->decode(tokens)) : "";
}

}  // namespace loom::train

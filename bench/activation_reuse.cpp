// Does a layer's compute cost more in a pipeline's order than in the order `loom profile`
// times it? One process, one thread: a stage of `layers` transformer layers of
// configs/gpt-fortunes.toml (width 128, seq 64, 4 heads), micro-batch B, `live` micro-batches
// in two orders:
//   adjacent: F0 B0 F1 B1 ...        (1F1B on one stage, and what loom profile times)
//   apart:    F0 F1 .. Fk B0 B1 .. Bk (GPipe: every forward's activations wait for the others)
// With --gap-us G the apart order also waits G us before each action, as a pipeline rank waits
// for its peer: polling with 20 us sleeps like loom's communication engine (--spin 0), with
// yields (--spin 1), in one sleep (--spin 2) or spinning on the clock (--spin 3).
// The two orders alternate round by round so that this VM's speed changes hit both alike.
// Prints the median per-layer forward and backward of each order and their ratio.
// usage: activation_reuse [--live K (2)] [--micro-batch B (16)] [--layers L (2)] [--rounds R (40)]
//                         [--gap-us G (0)] [--spin 0|1|2|3 (0)]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "loom/common/malloc_tuning.h"
#include "loom/config/config.h"
#include "loom/model/block_timing.h"
#include "loom/model/model.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Sums {
  double f = 0, b = 0;
};

}  // namespace

int main(int argc, char** argv) {
  loom::tune_malloc_for_training();
  int live = 2, layers = 2, rounds = 40, gap_us = 0, spin = 0, mb = 16;
  struct Flag {
    const char* name;
    int* value;
    long lo, hi;
  } flags[] = {{"--live", &live, 1, 1 << 20},     {"--layers", &layers, 1, 1 << 10},
               {"--rounds", &rounds, 1, 1 << 20}, {"--gap-us", &gap_us, 0, 1 << 30},
               {"--spin", &spin, 0, 3},           {"--micro-batch", &mb, 1, 1 << 20}};
  for (int i = 1; i < argc; i += 2) {
    const Flag* f = nullptr;
    for (const Flag& x : flags)
      if (std::strcmp(argv[i], x.name) == 0) f = &x;
    char* end = nullptr;
    const long v = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : 0;
    if (!f || i + 1 >= argc || *argv[i + 1] == '\0' || *end != '\0' || v < f->lo || v > f->hi) {
      std::fprintf(stderr,
                   "activation_reuse: bad flag or value at '%s'; usage at the top of "
                   "bench/activation_reuse.cpp\n",
                   argv[i]);
      return 2;
    }
    *f->value = static_cast<int>(v);
  }
  torch::set_num_threads(1);
  loom::config::ModelConfig cfg;
  cfg.width = 128;
  cfg.seq_len = 64;
  cfg.heads = 4;
  cfg.layers = layers;
  loom::model::Model m = loom::model::build(cfg, 1);
  std::vector<std::shared_ptr<loom::model::Block>> stage(m.blocks.begin() + 1,
                                                         m.blocks.begin() + 1 + layers);
  std::vector<torch::Tensor> in, grad;
  for (int k = 0; k < live; ++k) {
    in.push_back(torch::randn({mb, cfg.seq_len, cfg.width}));
    grad.push_back(torch::randn({mb, cfg.seq_len, cfg.width}));
  }
  // The wait before every action of the apart order (--gap-us, --spin: see the top).
  auto gap = [&] {
    if (gap_us <= 0) return;
    if (spin == 2) {
      std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      return;
    }
    const double end = now() + gap_us * 1e-6;
    while (now() < end) {
      if (spin == 1)
        std::this_thread::yield();
      else if (spin == 0)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  };
  auto forward = [&](int k, Sums& s) {
    double t0 = now();
    torch::Tensor x = in[k].detach().requires_grad_(true);
    for (auto& b : stage) x = b->forward(x);
    s.f += now() - t0;
    return x;
  };
  auto backward = [&](torch::Tensor y, int k, Sums& s) {
    double t0 = now();
    y.backward(grad[k]);
    s.b += now() - t0;
  };
  std::vector<double> af, ab, pf, pb;
  for (int r = 0; r < rounds + 3; ++r) {
    Sums adj, apart;
    for (int k = 0; k < live; ++k) backward(forward(k, adj), k, adj);
    std::vector<torch::Tensor> ys;
    for (int k = 0; k < live; ++k) {
      gap();
      ys.push_back(forward(k, apart));
    }
    for (int k = 0; k < live; ++k) {
      gap();
      backward(ys[k], k, apart);
    }
    ys.clear();
    if (r < 3) continue;  // warm-up
    const double per = 1e3 / (live * layers);
    af.push_back(adj.f * per);
    ab.push_back(adj.b * per);
    pf.push_back(apart.f * per);
    pb.push_back(apart.b * per);
  }
  using loom::model::median_of;
  std::printf("live %d, micro-batch %lld, %d layers, %d rounds; ms per layer (median)\n", live,
              static_cast<long long>(mb), layers, rounds);
  std::printf("adjacent F %.3f B %.3f F+B %.3f\n", median_of(af), median_of(ab),
              median_of(af) + median_of(ab));
  std::printf("apart    F %.3f B %.3f F+B %.3f\n", median_of(pf), median_of(pb),
              median_of(pf) + median_of(pb));
  std::printf("apart / adjacent: F %.3f B %.3f F+B %.3f\n", median_of(pf) / median_of(af),
              median_of(pb) / median_of(ab),
              (median_of(pf) + median_of(pb)) / (median_of(af) + median_of(ab)));
  return 0;
}

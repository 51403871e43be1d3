#pragma once
// Learning rate at a step: linear warm-up from lr/warmup to lr over `warmup` steps, then cosine
// decay to min_lr at the last step (or constant).
#include <cmath>

#include "loom/config/config.h"

namespace loom::train {

inline double learning_rate(config::LrSchedule kind, double lr, double min_lr, long warmup,
                            long total, long step) {
  if (warmup > 0 && step < warmup) return lr * double(step + 1) / double(warmup);
  if (kind != config::LrSchedule::Cosine || total <= warmup + 1) return lr;
  double progress = double(step - warmup) / double(total - warmup - 1);
  progress = std::min(1.0, std::max(0.0, progress));
  return min_lr + 0.5 * (lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace loom::train

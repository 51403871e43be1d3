#pragma once
// The run's loss plot (loss.svg in the run folder): training and evaluation loss against steps,
// as a plain SVG file that any browser shows. No plotting library: a few lines and labels.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::train {

struct LossCurves {
  std::vector<std::pair<int64_t, double>> train, eval;  // (step, loss), steps increasing
};

// The SVG document; non-finite losses are left out. `title` names the run.
std::string loss_svg(const LossCurves& curves, const std::string& title);

// The curves recorded in a metrics.jsonl ("loss" of step lines, "eval_loss" of evaluation
// lines): a resumed run plots the steps before its checkpoint too. Empty when unreadable.
LossCurves read_loss_curves(const std::string& metrics_path);

}  // namespace loom::train

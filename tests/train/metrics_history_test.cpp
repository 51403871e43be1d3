// What a resumed run keeps of metrics.jsonl (train/step_metrics.h): the lines of steps up to the
// checkpoint's, without later steps, summaries or lines that are not JSON.
#include <gtest/gtest.h>

#include "loom/train/step_metrics.h"

namespace loom::train {
namespace {

const char* kStep1 = R"({"step": 1, "loss": 5.5, "lr": 0.001})";
const char* kStep2 = R"({"step": 2, "loss": 5.4, "lr": null})";
const char* kEval2 = R"({"step": 2, "eval_loss": 5.3, "eval_samples": 25})";
const char* kStep3 = R"({"step": 3, "loss": 5.2, "lr": 0.001})";
const char* kSummary = R"({"summary": "run", "steps": 3})";

std::string lines(std::initializer_list<std::string> each) {
  std::string out;
  for (const std::string& l : each) out += l + "\n";
  return out;
}

TEST(MetricsHistory, KeepsTheStepsUpToTheCheckpointAndTheirEvaluations) {
  MetricsHistory h;
  const std::string kept = steps_up_to(lines({kStep1, kStep2, kEval2, kStep3, kSummary}), 2, &h);
  EXPECT_EQ(kept, lines({kStep1, kStep2, kEval2}));
  EXPECT_EQ(h.damaged, 0);
  EXPECT_EQ(h.last_step, 2);  // the evaluation's line is not a training step's
}

TEST(MetricsHistory, LinesThatAreNotJsonAreRemovedAndCounted) {
  // A step line cut short mid-value, one with a zero byte in it, and one whose start is damaged.
  const std::string cut = std::string(kStep2).substr(0, 20);
  std::string zero = kStep1;
  zero[14] = '\0';
  MetricsHistory h;
  const std::string kept =
      steps_up_to(lines({zero, cut, kEval2, "{\"st\x01p\": 3, \"loss\": 1}", kStep3}), 3, &h);
  EXPECT_EQ(kept, lines({kEval2, kStep3}));
  EXPECT_EQ(h.damaged, 3);
  EXPECT_EQ(h.last_step, 3);
}

TEST(MetricsHistory, AHoleBeforeTheCheckpointShowsInTheLastStep) {
  MetricsHistory h;
  EXPECT_EQ(steps_up_to(lines({kStep1, kSummary}), 3, &h), lines({kStep1}));
  EXPECT_EQ(h.last_step, 1);
  MetricsHistory none;
  EXPECT_EQ(steps_up_to("", 3, &none), "");
  EXPECT_EQ(none.last_step, 0);
  EXPECT_EQ(none.damaged, 0);
}

}  // namespace
}  // namespace loom::train

// Evaluation that means something (train/evaluator.h, train/step_metrics.h): the last
// evaluation of a run reads the whole test split (10,000 Fashion-MNIST images, the last batch
// partial) and gives the loss and accuracy of the final parameters on it; language models
// report perplexity and bits per byte; the run folder gets loss.svg.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "../parallel/sync_test_util.h"
#include "loom/data/dataset.h"
#include "loom/data/tokenizer.h"
#include "loom/train/data_feed.h"
#include "loom/train/evaluator.h"
#include "loom/train/loss_plot.h"

using namespace loom;

namespace {

namespace fs = std::filesystem;

const char* kFashion = "/usr/share/datasets/fashion-mnist";

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The lines of metrics.jsonl that start with `start` and have `key`.
std::vector<std::string> lines_with(const std::string& dir, const std::string& key,
                                    const std::string& start = "{\"step\"") {
  std::vector<std::string> out;
  std::istringstream in(read(fs::path(dir) / "metrics.jsonl"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(start, 0) == 0 && line.find("\"" + key + "\"") != std::string::npos)
      out.push_back(line);
  return out;
}

double number(const std::string& line, const std::string& key) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(line, m, std::regex("\"" + key + "\": ?([-+0-9.eE]+)")))
      << key << " missing in " << line;
  return m.empty() ? NAN : std::stod(m[1].str());
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

config::Config fashion_mlp() {
  config::Config c = test::tiny("mlp");
  c.data.kind = config::DataKind::FashionMnist;
  c.train.final_eval = true;  // the tiny configuration leaves it out
  c.train.steps = 6;
  c.train.eval_every = 3;
  c.train.eval_batches = 2;
  c.train.optimizer = config::Optimizer::AdamW;  // so that the model learns in a few steps
  c.train.lr = 2e-3;
  c.train.global_batch = 96;  // 10,000 = 104 x 96 + 16: a partial last batch
  return c;
}

// The loss and accuracy of `params` on every test image, computed here in one process.
std::pair<double, double> direct_eval(const config::Config& c, const test::Params& params) {
  model::Model m = model::build(c.model, c.train.seed);
  parallel::Stage st(0, 1, m.blocks, 0);
  torch::NoGradGuard ng;
  for (auto& p : st.params()) p.tensor.copy_(params.at(p.name));
  auto test_split = data::open_idx_images(kFashion, data::Split::Test);
  double loss = 0, hits = 0;
  const int64_t n = test_split->size(), chunk = 1000;
  for (int64_t first = 0; first < n; first += chunk) {
    std::vector<int64_t> idx;
    for (int64_t i = first; i < std::min(n, first + chunk); ++i) idx.push_back(i);
    data::Batch b = test_split->get(idx);
    auto x = torch::from_blob(b.input.f32.data(), b.input.shape, torch::kFloat32);
    auto y = torch::from_blob(b.target.i64.data(), b.target.shape, torch::kInt64);
    auto logits = st.forward_eval(x);
    loss += model::Model::loss(logits, y).item<double>() * double(idx.size());
    hits += logits.argmax(1).eq(y).sum().item<double>();
  }
  return {loss / double(n), hits / double(n)};
}

TEST(Eval, CountsFollowTheSplit) {
  config::Config c = fashion_mlp();
  EXPECT_EQ(train::eval_batch_count(c, 10000, true), 105);
  EXPECT_EQ(train::eval_batch_count(c, 50, false), 0);  // no full batch
  EXPECT_EQ(train::eval_batch_count(c, 50, true), 1);
}

// dp = 2 (the padding of the last batch lands on one replica's first micro-batch), and
// pp = 2 (the padded micro-batches keep the shape the pipeline sends).
TEST(Eval, LastEvaluationReadsTheWholeTestSplit) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << kFashion << " missing: make deps";
  config::Config c = fashion_mlp();
  test::set_layout(c, 2, 1, 1, 1, "1f1b", "allreduce", 2);
  const std::string dir = test::shared_tmp("eval-dp2");
  const test::Params params = test::train_on(c, 2, "eval-dp2");
  c.parallel.pp = 2;
  c.parallel.dp = 1;
  const std::string dir_pp = test::shared_tmp("eval-pp2");
  test::train_on(c, 2, "eval-pp2");
  if (comm::world().rank() != 0) return;

  const auto evals = lines_with(dir, "eval_loss");
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(number(evals[0], "eval_samples"), 2 * 96);  // during the run: the subset
  EXPECT_EQ(number(evals[1], "eval_samples"), 10000);   // at the end: every test image
  const auto [loss, accuracy] = direct_eval(c, params);
  EXPECT_NEAR(number(evals[1], "eval_loss"), loss, 1e-4 * loss);
  EXPECT_NEAR(number(evals[1], "eval_accuracy"), accuracy, 1e-6);
  const auto summary = lines_with(dir, "eval_loss", "{\"summary\"");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(number(summary[0], "eval_samples"), 10000);
  EXPECT_NEAR(number(summary[0], "eval_accuracy"), accuracy, 1e-6);

  const auto evals_pp = lines_with(dir_pp, "eval_loss");
  ASSERT_EQ(evals_pp.size(), 2u);
  EXPECT_EQ(number(evals_pp[1], "eval_samples"), 10000);
  EXPECT_NEAR(number(evals_pp[1], "eval_loss"), loss, 1e-4 * loss);
  EXPECT_NEAR(number(evals_pp[1], "eval_accuracy"), accuracy, 1e-6);
}

// train.final_eval = false: the last step evaluates only when eval_every says so, on
// eval_batches batches like any other step; no evaluation at all when it does not.
TEST(Eval, WithoutTheFinalEvaluationOnlyThePeriodicOnes) {
  if (!fs::exists(kFashion)) GTEST_SKIP() << kFashion << " missing: make deps";
  config::Config c = fashion_mlp();  // 6 steps, an evaluation of 2 batches every 3
  test::set_layout(c, 2, 1, 1, 1, "1f1b", "allreduce", 2);
  c.train.final_eval = false;
  const std::string dir = test::shared_tmp("eval-no-final");
  test::train_on(c, 2, "eval-no-final");
  c.train.eval_every = 4;
  const std::string dir_4 = test::shared_tmp("eval-no-final-4");
  test::train_on(c, 2, "eval-no-final-4");
  c.train.eval_every = 0;
  c.output.progress = true;  // rank 0 prints the summary table
  const std::string dir_none = test::shared_tmp("eval-none");
  testing::internal::CaptureStderr();
  test::train_on(c, 2, "eval-none");
  const std::string printed = testing::internal::GetCapturedStderr();
  if (comm::world().rank() != 0) return;

  const auto evals = lines_with(dir, "eval_loss");
  ASSERT_EQ(evals.size(), 2u);
  EXPECT_EQ(number(evals[1], "step"), 6);
  EXPECT_EQ(number(evals[1], "eval_samples"), 2 * 96);  // the subset, at the end too
  const auto evals_4 = lines_with(dir_4, "eval_loss");
  ASSERT_EQ(evals_4.size(), 1u);
  EXPECT_EQ(number(evals_4[0], "step"), 4);
  const auto summary = lines_with(dir_4, "eval_loss", "{\"summary\"");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(number(summary[0], "eval_step"), 4);
  EXPECT_TRUE(lines_with(dir_none, "eval_loss").empty());
  EXPECT_NE(printed.find("eval loss"), std::string::npos) << printed;
  EXPECT_NE(printed.find("none (no evaluation in this run)"), std::string::npos) << printed;
}

config::Config text_gpt() {
  config::Config c = test::tiny("gpt");
  c.data.kind = config::DataKind::Text;
  c.model.vocab = 256;
  c.train.steps = 4;
  c.train.eval_every = 2;
  c.train.eval_batches = 2;
  return c;
}

// Perplexity and bits per byte follow from the loss; the loss plot has both curves.
void check_language_metrics(const std::string& dir, double bytes_per_token, int64_t steps) {
  const auto evals = lines_with(dir, "eval_loss");
  ASSERT_EQ(evals.size(), 2u);
  for (const auto& e : evals) {
    const double loss = number(e, "eval_loss");
    EXPECT_NEAR(number(e, "eval_perplexity"), std::exp(loss), 1e-4 * std::exp(loss));
    EXPECT_NEAR(number(e, "eval_bits_per_byte"), loss / std::log(2.0) / bytes_per_token, 1e-4);
  }
  const auto summary = lines_with(dir, "eval_loss", "{\"summary\"");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_NEAR(number(summary[0], "eval_bits_per_byte"), number(evals[1], "eval_bits_per_byte"),
              1e-5);
  const std::string svg = read(fs::path(dir) / "loss.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 80);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u);  // train and eval
  EXPECT_EQ(count(svg, "<circle"), evals.size());
  // The training curve has a point per step.
  const size_t at = svg.find("<polyline");
  const std::string train_points = svg.substr(at, svg.find("/>", at) - at);
  EXPECT_EQ(count(train_points, ","), static_cast<size_t>(steps));
  for (const auto& entry : fs::directory_iterator(dir))  // no temporary file left behind
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST(Eval, BytesReportPerplexityAndBitsPerByte) {
  config::Config c = text_gpt();
  const std::string dir = test::shared_tmp("eval-bytes");
  test::train_on(c, 2, "eval-bytes");
  if (comm::world().rank() == 0) check_language_metrics(dir, 1.0, c.train.steps);
}

TEST(Eval, TokenizedTextReportsBitsPerByteOfItsBytes) {
  const std::string tok = test::shared_tmp("eval-tok") + ".model";
  if (comm::world().rank() == 0) data::train_tokenizer("/usr/share/games/fortunes", 512, tok);
  comm::world().barrier()->wait();
  config::Config c = text_gpt();
  c.data.tokenizer = tok;
  c.model.vocab = 512;
  const std::string dir = test::shared_tmp("eval-tokenized");
  test::train_on(c, 2, "eval-tokenized");
  if (comm::world().rank() != 0) return;
  const double bytes_per_token = train::open_dataset(c, data::Split::Test)->bytes_per_token();
  EXPECT_GT(bytes_per_token, 1.5);
  check_language_metrics(dir, bytes_per_token, c.train.steps);
  std::error_code ec;
  fs::remove_all(tok + ".cache", ec);
  fs::remove(tok, ec);
}

// A resumed run's plot starts from the curves of its metrics.jsonl (steps, evaluations, and
// no summary or calibration values); non-finite losses are left out of the picture.
TEST(LossPlot, CurvesComeBackFromTheMetrics) {
  const fs::path dir = test::shared_tmp("loss-plot-" + std::to_string(comm::world().rank()));
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.jsonl")
      << "{\"step\": 1, \"loss\": 5.5, \"lr\": 0.001}\n"
      << "{\"step\": 2, \"loss\": 4.25, \"lr\": 0.001}\n"
      << "{\"step\": 2, \"calib_micro_batch\": 4}\n"
      << "{\"step\": 2, \"eval_loss\": 4.5, \"eval_samples\": 64}\n"
      << "{\"step\": 3, \"loss\": null, \"skipped\": 1}\n"
      << "{\"summary\": \"run\", \"eval_loss\": 4.5}\n";
  const train::LossCurves c = train::read_loss_curves((dir / "metrics.jsonl").string());
  ASSERT_EQ(c.train.size(), 2u);
  EXPECT_EQ(c.train[1], (std::pair<int64_t, double>{2, 4.25}));
  ASSERT_EQ(c.eval.size(), 1u);
  EXPECT_EQ(c.eval[0], (std::pair<int64_t, double>{2, 4.5}));
  train::LossCurves with_nan = c;
  with_nan.train.push_back({3, NAN});
  const std::string svg = train::loss_svg(with_nan, "a <run> & more");
  EXPECT_NE(svg.find("a &lt;run&gt; &amp; more"), std::string::npos);
  const size_t at = svg.find("<polyline");
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(count(svg.substr(at, svg.find("/>", at) - at), ","), 2u);  // the NaN is left out
  EXPECT_EQ(svg.find(",nan"), std::string::npos);
  EXPECT_EQ(svg.find(",-nan"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace

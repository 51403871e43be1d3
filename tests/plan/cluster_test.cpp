// Cluster files: the shipped ones load, bad ones fail with one line naming the key.
#include "loom/plan/cluster.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "loom/common/error.h"

namespace loom::plan {
namespace {

const char* kGood = R"(
name = "tiny"
[node]
devices = 2
[device]
memory_gb = 16
memory_bandwidth_gbs = 100
precision = "fp32"
peak_tflops = { fp32 = 1.0 }
[efficiency]
gemm_size = [64, 256, 1024]
gemm = [0.25, 0.5, 1.0]
elementwise = 0.5
[intra]
bandwidth_gbs = 10
latency_us = 2
[inter]
bandwidth_gbs = 1
efficiency = 0.5
latency_us = 20
)";

std::string error_of(const std::string& text) {
  try {
    parse_cluster(text, "x.toml");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Cluster, ParsesAndInterpolates) {
  Cluster c = parse_cluster(kGood, "x.toml");
  EXPECT_EQ(c.devices_per_node, 2);
  EXPECT_DOUBLE_EQ(c.memory_bytes, 16e9);
  EXPECT_DOUBLE_EQ(c.peak("fp32"), 1e12);
  EXPECT_DOUBLE_EQ(c.inter.effective_bandwidth(), 0.5e9);
  EXPECT_DOUBLE_EQ(c.intra.latency, 2e-6);
  EXPECT_DOUBLE_EQ(c.gemm_fraction(32), 0.25);    // flat below
  EXPECT_DOUBLE_EQ(c.gemm_fraction(128), 0.375);  // halfway in log2
  EXPECT_DOUBLE_EQ(c.gemm_fraction(4096), 1.0);   // flat above
  // Round trip through to_toml.
  Cluster d = parse_cluster(to_toml(c), "y.toml");
  EXPECT_EQ(d.gemm_efficiency, c.gemm_efficiency);
  EXPECT_DOUBLE_EQ(d.inter.latency, c.inter.latency);
}

// gemm_in_training scales the whole curve (the curve: products alone; the scale: inside a
// training step), survives to_toml, and is 1 when absent.
TEST(Cluster, GemmInTrainingScalesTheCurve) {
  EXPECT_DOUBLE_EQ(parse_cluster(kGood, "x.toml").gemm_in_training, 1.0);
  std::string text = kGood;
  text.replace(text.find("elementwise"), 0, "gemm_in_training = 0.8\n");
  Cluster c = parse_cluster(text, "x.toml");
  EXPECT_DOUBLE_EQ(c.gemm_fraction(32), 0.2);
  EXPECT_DOUBLE_EQ(c.gemm_fraction(128), 0.3);
  EXPECT_DOUBLE_EQ(c.gemm_fraction(4096), 0.8);
  EXPECT_DOUBLE_EQ(parse_cluster(to_toml(c), "y.toml").gemm_in_training, 0.8);
  // Above 1 (a benchmark that under-reads the products of a step) the fraction stops at 1.
  text.replace(text.find("0.8\n"), 3, "1.5");
  c = parse_cluster(text, "x.toml");
  EXPECT_DOUBLE_EQ(c.gemm_fraction(128), 0.5625);
  EXPECT_DOUBLE_EQ(c.gemm_fraction(4096), 1.0);
  text.replace(text.find("1.5\n"), 3, "2.5");
  EXPECT_NE(error_of(text).find("gemm_in_training"), std::string::npos) << error_of(text);
}

// elementwise_in_training scales the copy's rate, survives to_toml, and is 1 when absent.
TEST(Cluster, ElementwiseInTraining) {
  EXPECT_DOUBLE_EQ(parse_cluster(kGood, "x.toml").elementwise_in_training, 1.0);
  std::string text = kGood;
  text.replace(text.find("elementwise"), 0, "elementwise_in_training = 0.5\n");
  const Cluster c = parse_cluster(text, "x.toml");
  EXPECT_DOUBLE_EQ(c.elementwise_in_training, 0.5);
  EXPECT_DOUBLE_EQ(parse_cluster(to_toml(c), "y.toml").elementwise_in_training, 0.5);
  text.replace(text.find("0.5\n"), 3, "1.5");
  EXPECT_NE(error_of(text).find("elementwise_in_training"), std::string::npos) << error_of(text);
}

// attention_forward/backward: one pair for any shape, or arrays with the shape of each
// measurement, of which a model takes the nearest (log2 of head size plus log2 of sequence).
TEST(Cluster, AttentionKernelsByShape) {
  EXPECT_EQ(parse_cluster(kGood, "x.toml").attention_kernel(64, 1024), nullptr);
  std::string text = kGood;
  text.replace(text.find("elementwise"), 0, "attention_forward = 0.5\nattention_backward = 0.4\n");
  Cluster c = parse_cluster(text, "x.toml");
  ASSERT_NE(c.attention_kernel(64, 1024), nullptr);
  EXPECT_DOUBLE_EQ(c.attention_kernel(256, 512)->forward, 0.5);
  EXPECT_DOUBLE_EQ(parse_cluster(to_toml(c), "y.toml").attention_kernel(32, 8)->backward, 0.4);

  text = kGood;
  text.replace(text.find("elementwise"), 0,
               "attention_head_size = [128, 64]\nattention_seq_len = [4096, 1024]\n"
               "attention_forward = [0.5, 0.3]\nattention_backward = [0.45, 0.25]\n");
  c = parse_cluster(text, "x.toml");
  EXPECT_DOUBLE_EQ(c.attention_kernel(64, 2048)->forward, 0.3);    // 1 away, the other 2
  EXPECT_DOUBLE_EQ(c.attention_kernel(128, 2048)->forward, 0.5);   // 1 away, the other 2
  EXPECT_DOUBLE_EQ(c.attention_kernel(96, 1024)->backward, 0.25);  // 0.58 away, the other 2.4
  EXPECT_DOUBLE_EQ(c.attention_kernel(128, 8192)->backward, 0.45);
  const Cluster d = parse_cluster(to_toml(c), "y.toml");
  ASSERT_EQ(d.attention.size(), 2u);
  EXPECT_DOUBLE_EQ(d.attention[1].head_size, 64);
  EXPECT_DOUBLE_EQ(d.attention[1].seq_len, 1024);
  EXPECT_DOUBLE_EQ(d.attention[1].backward, 0.25);

  std::string bad = text;
  bad.replace(bad.find("[4096, 1024]"), 12, "[4096]");
  EXPECT_NE(error_of(bad).find("attention_seq_len must have as many values as attention_forward"),
            std::string::npos)
      << error_of(bad);
  bad = text;
  bad.replace(bad.find("[0.5, 0.3]"), 10, "[1.5, 0.3]");
  EXPECT_NE(error_of(bad).find("fractions"), std::string::npos) << error_of(bad);
  bad = kGood;
  bad.replace(bad.find("elementwise"), 0, "attention_head_size = [64]\nattention_forward = 0.5\n");
  EXPECT_NE(error_of(bad).find("attention_head_size goes with arrays"), std::string::npos)
      << error_of(bad);
}

TEST(Cluster, ErrorsNameTheKey) {
  std::string text = kGood;
  auto without = [&](const std::string& line) {
    std::string t = text;
    t.erase(t.find(line), line.size());
    return t;
  };
  EXPECT_EQ(error_of(without("memory_gb = 16\n")), "x.toml: [device] memory_gb is missing; add it");
  EXPECT_NE(
      error_of(without("[intra]\nbandwidth_gbs = 10\nlatency_us = 2\n")).find("[intra] is missing"),
      std::string::npos);
  std::string bad = text;
  bad.replace(bad.find("devices = 2"), 11, "devices = 0");
  EXPECT_NE(error_of(bad).find("[node] devices must be in [1,"), std::string::npos);
  bad = text;
  bad.replace(bad.find("gemm = [0.25, 0.5, 1.0]"), 23, "gemm = [0.25, 0.5]");
  EXPECT_NE(error_of(bad).find("as many values as gemm_size"), std::string::npos);
  EXPECT_NE(error_of("name = \"x\"\nbogus = 1\n").find("unknown key 'bogus'"), std::string::npos);
  EXPECT_NE(error_of("name = [").find("cannot parse x.toml at line 1"), std::string::npos);
  for (const std::string& e : {error_of(without("memory_gb = 16\n")), error_of("name = [")})
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_THROW(load_cluster("/nonexistent/cluster.toml"), UsageError);
}

TEST(Cluster, ShippedFilesLoad) {
  for (const char* name : {"a100-80gb", "h100-80gb"}) {
    Cluster c = load_cluster(std::string(LOOM_CLUSTERS_DIR) + "/" + name + ".toml");
    EXPECT_EQ(c.name, name);
    EXPECT_EQ(c.devices_per_node, 8);
    EXPECT_DOUBLE_EQ(c.memory_bytes, 80e9);
    EXPECT_GT(c.intra.effective_bandwidth(), c.inter.effective_bandwidth());
  }
}

// Every number in the GPU cluster files says where it comes from: a tag in its own comment, or
// in the comment block just above it (since the last blank line). ASSUMED counts as saying so.
TEST(Cluster, EveryShippedConstantNamesItsSource) {
  const std::regex tag("SPEC|NCCL|MEASURED|FITTED|ASSUMED");
  const std::regex number_key(R"(^([a-z_]+) = [\[{]?[0-9.])");
  for (const char* name : {"a100-80gb", "h100-80gb", "h200"}) {
    std::ifstream in(std::string(LOOM_CLUSTERS_DIR) + "/" + name + ".toml");
    ASSERT_TRUE(in) << name;
    std::string line, block;  // comments since the last blank line
    int checked = 0;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.empty() || line[0] == '[') block.clear();
      if (line.rfind('#', 0) == 0) block += line;
      std::smatch m;
      if (!std::regex_search(line, m, number_key)) continue;
      ++checked;
      EXPECT_TRUE(std::regex_search(line, tag) || std::regex_search(block, tag))
          << name << ".toml line " << n << ": " << m[1] << " has no source";
    }
    EXPECT_GE(checked, 14) << name;
  }
}

}  // namespace
}  // namespace loom::plan

namespace loom::plan {
namespace {

// A profile of another processor says so in one line naming both; the same one says nothing.
TEST(Cluster, WarnsWhenProfiledOnAnotherProcessor) {
  const std::string here = this_cpu();
  if (here.empty()) GTEST_SKIP() << "no model name in /proc/cpuinfo";
  Cluster c;
  c.origin = "x.toml";
  c.shared = true;
  c.cpu = "Some Other CPU 9000";
  const std::string w = other_cpu_warning(c);
  EXPECT_NE(w.find("Some Other CPU 9000"), std::string::npos) << w;
  EXPECT_NE(w.find(here), std::string::npos) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos);
  c.cpu = here;
  EXPECT_EQ(other_cpu_warning(c), "");
  // to_toml records the processor of a shared cluster, and parse_cluster reads it back.
  c.name = "m";
  c.precision = "fp32";
  c.peak_flops["fp32"] = 1e12;
  c.memory_bytes = c.memory_bandwidth = 1e9;
  c.gemm_size = {1};
  c.gemm_efficiency = {1};
  c.intra.bandwidth = c.inter.bandwidth = 1e9;
  c.cpu = "";
  EXPECT_EQ(parse_cluster(to_toml(c), "m.toml").cpu, here);
}

}  // namespace
}  // namespace loom::plan

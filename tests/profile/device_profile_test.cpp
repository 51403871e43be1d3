// The cluster `loom profile --device cuda` writes, from measurements made up so that every
// efficiency is known; and the GPU measurement itself where one is visible.
#include "loom/profile/device_profile.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "loom/common/error.h"

namespace loom::profile {
namespace {

plan::Cluster spec() {
  plan::Cluster c;
  c.name = "gpu";
  c.origin = "clusters/gpu.toml";
  c.note = "8 GPUs per node";
  c.devices_per_node = 8;
  c.memory_bytes = 141e9;
  c.memory_bandwidth = 4.8e12;
  c.precision = "bf16";
  c.peak_flops = {{"bf16", 1000e12}, {"fp32", 60e12}};
  c.gemm_size = {512, 4096};
  c.gemm_efficiency = {0.1, 0.5};
  c.gemm_in_training = 0.75;        // not measured by the profile: kept from the base
  c.elementwise_in_training = 0.5;  // likewise
  c.intra = {450e9, 0.8, 5e-6};
  c.inter = {50e9, 0.8, 10e-6};
  return c;
}

// Seconds that give `efficiency` of `rate` for `work`.
double at(double work, double rate, double efficiency) {
  return work / (efficiency * rate);
}

DeviceMeasurements made_up() {
  DeviceMeasurements m;
  m.device = "NVIDIA Test GPU";
  for (double n : {256.0, 1024.0, 8192.0}) m.gemm_size.push_back(n);
  m.gemm_s = {at(2 * 256.0 * 256 * 256, 1000e12, 0.05), at(2 * 1024.0 * 1024 * 1024, 1000e12, 0.4),
              at(2 * 8192.0 * 8192 * 8192, 1000e12, 0.7)};
  m.copy_bytes = 1e9;
  m.copy_s = at(1e9, 4.8e12, 0.85);
  m.attention = {{128, 4096, 5e12, at(5e12, 1000e12, 0.6), at(2.5 * 5e12, 1000e12, 0.45)},
                 {64, 1024, 1e12, at(1e12, 1000e12, 0.3), at(2.5 * 1e12, 1000e12, 0.25)}};
  m.optimizer_s_per_param = 2e-12;
  return m;
}

TEST(DeviceProfile, MeasurementsReplaceTheSpecificationsEfficiencies) {
  const plan::Cluster c = device_cluster(spec(), made_up(), "2026-12-02 18:00");
  EXPECT_EQ(c.gemm_size, (std::vector<double>{256, 1024, 8192}));
  ASSERT_EQ(c.gemm_efficiency.size(), 3u);
  EXPECT_NEAR(c.gemm_efficiency[0], 0.05, 1e-12);
  EXPECT_NEAR(c.gemm_efficiency[1], 0.4, 1e-12);
  EXPECT_NEAR(c.gemm_efficiency[2], 0.7, 1e-12);
  EXPECT_NEAR(c.elementwise_efficiency, 0.85, 1e-12);
  ASSERT_EQ(c.attention.size(), 2u);
  EXPECT_NEAR(c.attention_kernel(128, 4096)->forward, 0.6, 1e-12);
  EXPECT_NEAR(c.attention_kernel(128, 4096)->backward, 0.45, 1e-12);
  EXPECT_NEAR(c.attention_kernel(64, 1024)->forward, 0.3, 1e-12);
  EXPECT_NEAR(c.attention_kernel(64, 1024)->backward, 0.25, 1e-12);
  EXPECT_DOUBLE_EQ(c.optimizer_s_per_param, 2e-12);
  // What a single GPU cannot measure stays the specification's.
  EXPECT_DOUBLE_EQ(c.memory_bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(c.peak("bf16"), 1000e12);
  EXPECT_DOUBLE_EQ(c.intra.bandwidth, 450e9);
  EXPECT_EQ(c.devices_per_node, 8);
  // It says what was measured, on what, when, and where the rest comes from.
  for (const std::string& text : {c.note, c.calibrated}) {
    EXPECT_NE(text.find("MEASURED on NVIDIA Test GPU"), std::string::npos) << text;
    EXPECT_NE(text.find("2026-12-02 18:00"), std::string::npos) << text;
    EXPECT_NE(text.find("clusters/gpu.toml"), std::string::npos) << text;
  }
  EXPECT_EQ(c.note.rfind("8 GPUs per node; ", 0), 0u) << c.note;
  EXPECT_EQ(c.calibrated.rfind("none: ", 0), 0u) << c.calibrated;
  // And the file reads back.
  const plan::Cluster d = plan::parse_cluster(plan::to_toml(c), "measured.toml");
  EXPECT_NEAR(d.gemm_efficiency[2], 0.7, 1e-6);
  EXPECT_NEAR(d.gemm_fraction(8192), 0.7 * 0.75, 1e-6);
  EXPECT_NEAR(d.attention_kernel(128, 4096)->backward, 0.45, 1e-6);
  EXPECT_NEAR(d.attention_kernel(64, 1024)->forward, 0.3, 1e-6);
  EXPECT_NEAR(d.elementwise_efficiency, 0.85, 1e-6);
  EXPECT_NEAR(d.elementwise_in_training, 0.5, 1e-6);
}

TEST(DeviceProfile, AboveTheSpecificationIsRefused) {
  DeviceMeasurements m = made_up();
  m.gemm_s[2] /= 2;  // 1.4 of the peak: the file's peak is wrong
  try {
    device_cluster(spec(), m, "today");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("peak_tflops.bf16"), std::string::npos) << e.what();
  }
  m = made_up();
  m.copy_s /= 2;  // 1.7 of the memory bandwidth
  EXPECT_THROW(device_cluster(spec(), m, "today"), UsageError);
}

// Here (no GPU) one line naming the fix; on a GPU, numbers an H200-class device can reach.
TEST(DeviceProfile, MeasuresTheGpuOrSaysThereIsNone) {
  if (!torch::cuda::is_available()) {
    EXPECT_THROW(measure_cuda(0.05), UsageError);
    return;
  }
  const DeviceMeasurements m = measure_cuda(0.05);
  ASSERT_EQ(m.gemm_s.size(), 6u);
  for (double t : m.gemm_s) EXPECT_GT(t, 0);
  EXPECT_LT(m.gemm_s.front(), m.gemm_s.back());
  EXPECT_GT(m.copy_s, 0);
  ASSERT_EQ(m.attention.size(), 4u);
  for (const AttentionTiming& t : m.attention) {
    EXPECT_GT(t.forward_s, 0);
    EXPECT_GT(t.backward_s, 0);
  }
  EXPECT_GT(m.optimizer_s_per_param, 0);
}

}  // namespace
}  // namespace loom::profile

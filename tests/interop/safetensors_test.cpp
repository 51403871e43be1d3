// read_safetensors against files that are damaged in every way a header can be: each gives a
// UsageError naming the problem, before anything is allocated from the header's numbers.
#include "loom/interop/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "loom/common/error.h"
#include "loom/common/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("loom_st_test_" + std::to_string(::getpid()))).string();
  }
  void TearDown() override { fs::remove(path_); }

  // A file of `header` (its size little-endian first) and `data` bytes.
  void write(const std::string& header, size_t data) const {
    std::string file(8, '\0');
    for (size_t i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    loom::write_file_atomic(path_, file + header + std::string(data, '\0'));
  }
  // The UsageError's message on reading the file, or "" when it reads.
  std::string refusal() const {
    try {
      loom::interop::read_safetensors(path_);
    } catch (const loom::UsageError& e) {
      return e.what();
    }
    return "";
  }
  std::string refusal_of(const json& tensor, size_t data = 16) const {
    write(json{{"w", tensor}}.dump(), data);
    return refusal();
  }
  std::string path_;
};

TEST_F(Safetensors, RoundTripsF32) {
  const torch::Tensor a = torch::arange(6, torch::kFloat32).reshape({2, 3});
  const torch::Tensor b = torch::full({4}, -1.5);
  loom::interop::write_safetensors(path_, {{"a", a}, {"b", b}});
  const auto read = loom::interop::read_safetensors(path_);
  ASSERT_EQ(read.size(), 2U);
  EXPECT_TRUE(torch::equal(read.at("a"), a));
  EXPECT_TRUE(torch::equal(read.at("b"), b));
}

TEST_F(Safetensors, ReadsBf16AsF32) {
  write(json{{"w", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {0, 4}}}}}.dump(), 0);
  // 0x3f80 is 1.0 and 0xc000 is -2.0 in bfloat16.
  std::string file = loom::read_file(path_);
  file += std::string("\x80\x3f\x00\xc0", 4);
  loom::write_file_atomic(path_, file);
  const auto read = loom::interop::read_safetensors(path_);
  EXPECT_TRUE(torch::equal(read.at("w"), torch::tensor({1.0F, -2.0F})));
}

TEST_F(Safetensors, RefusesDamagedFiles) {
  loom::write_file_atomic(path_, "abc");
  EXPECT_NE(refusal().find("shorter than its header size"), std::string::npos);
  loom::write_file_atomic(path_, std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10));
  EXPECT_NE(refusal().find("header beyond the end"), std::string::npos);
  write("{\"w\": ", 0);
  EXPECT_NE(refusal().find("header: "), std::string::npos);
  write("[1, 2]", 0);
  EXPECT_NE(refusal().find("not a JSON object"), std::string::npos);
}

TEST_F(Safetensors, RefusesEntriesThatDoNotFitTheFile) {
  const json offsets = {0, 16};
  EXPECT_NE(refusal_of(5).find("lacks dtype, shape or data_offsets"), std::string::npos);
  EXPECT_NE(refusal_of({{"dtype", "F32"}, {"data_offsets", offsets}}).find("lacks"),
            std::string::npos);
  EXPECT_NE(refusal_of({{"dtype", "I8"}, {"shape", {16}}, {"data_offsets", offsets}})
                .find("is \"I8\"; loom reads F32, BF16 and F16"),
            std::string::npos);
  EXPECT_NE(
      refusal_of({{"dtype", "F32"}, {"shape", 4}, {"data_offsets", offsets}}).find("not a list"),
      std::string::npos);
  EXPECT_NE(refusal_of({{"dtype", "F32"}, {"shape", {-1, 4}}, {"data_offsets", offsets}})
                .find("not of sizes >= 0"),
            std::string::npos);
  // 2^40 x 2^20 elements: refused from the file's size, never allocated.
  EXPECT_NE(refusal_of({{"dtype", "F32"},
                        {"shape", {uint64_t{1} << 40, uint64_t{1} << 20}},
                        {"data_offsets", offsets}})
                .find("shape larger than the file"),
            std::string::npos);
  EXPECT_NE(refusal_of({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {"a", "b"}}})
                .find("not two sizes"),
            std::string::npos);
  // Offsets that wrap around 2^64 to the right difference.
  const uint64_t top = ~uint64_t{0};
  EXPECT_NE(refusal_of({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {top - 15, top}}})
                .find("do not fit its shape or the file"),
            std::string::npos);
  EXPECT_NE(
      refusal_of({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {16, 0}}}).find("do not fit"),
      std::string::npos);
  EXPECT_NE(
      refusal_of({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {8, 24}}}).find("do not fit"),
      std::string::npos);
  EXPECT_EQ(refusal_of({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", offsets}}), "");
}

TEST_F(Safetensors, MessagesStayOnOneLine) {
  write(json{{"a\nb", {{"dtype", "I8"}, {"shape", {1}}, {"data_offsets", {0, 1}}}}}.dump(), 1);
  const std::string message = refusal();
  EXPECT_NE(message.find("'a\\nb'"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

}  // namespace

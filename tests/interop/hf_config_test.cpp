// import_hf against config.json files that are not what they claim: one UsageError naming the
// key and what it must be, nothing written (nlohmann's own errors name neither, and exit 1).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/interop/hf.h"
#include "loom/interop/safetensors.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// An empty model folder (hf_) in a folder of its own (dir_), and import_hf of it.
class HfFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("loom_hf_folder_test_" + std::to_string(::getpid()));
    hf_ = dir_ / "hf";
    fs::remove_all(dir_);
    fs::create_directories(hf_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const json& j) const {
    loom::write_file_atomic((hf_ / name).string(), j.dump());
  }
  // The UsageError's message on importing the folder, or "" when it imports.
  std::string refusal() const {
    try {
      loom::interop::import_hf(hf_.string(), (dir_ / "out").string(), 0);
    } catch (const loom::UsageError& e) {
      EXPECT_FALSE(fs::exists(dir_ / "out")) << "written before the refusal";
      return e.what();
    }
    return "";
  }
  fs::path dir_, hf_;
};

class HfConfig : public HfFolder {
 protected:
  void SetUp() override {
    HfFolder::SetUp();
    // One small tensor: enough to read, far too little for the models below.
    loom::interop::write_safetensors((hf_ / "model.safetensors").string(),
                                     {{"model.embed_tokens.weight", torch::zeros({256, 8})}});
  }
  // A Llama of width 32 with `change` applied.
  static json llama(const json& change) {
    json c = {{"model_type", "llama"},        {"vocab_size", 256},        {"hidden_size", 32},
              {"num_hidden_layers", 2},       {"num_attention_heads", 2}, {"intermediate_size", 64},
              {"max_position_embeddings", 64}};
    for (const auto& [key, value] : change.items()) c[key] = value;  // null stays null
    return c;
  }
  using HfFolder::refusal;
  std::string refusal(const json& config) const {
    write("config.json", config);
    return refusal();
  }
};

TEST_F(HfConfig, NamesAValueOfTheWrongType) {
  EXPECT_NE(refusal(llama({{"num_attention_heads", "2"}}))
                .find("has \"num_attention_heads\": \"2\"; it must be an integer"),
            std::string::npos);
  EXPECT_NE(refusal(llama({{"rope_theta", "high"}}))
                .find("\"rope_theta\": \"high\"; it must be a number"),
            std::string::npos);
  EXPECT_NE(refusal(llama({{"tie_word_embeddings", 1}})).find("it must be true or false"),
            std::string::npos);
  EXPECT_NE(refusal(llama({{"model_type", 3}})).find("\"model_type\": 3; it must be a string"),
            std::string::npos);
  EXPECT_NE(refusal(json::array({1, 2})).find("not a JSON object"), std::string::npos);
}

TEST_F(HfConfig, RefusesImpossibleShapes) {
  EXPECT_NE(refusal(llama({{"num_attention_heads", 0}})).find("num_attention_heads 0"),
            std::string::npos);
  EXPECT_NE(refusal(llama({{"hidden_size", -32}})).find("model.width must be in 1..16777216"),
            std::string::npos);
  auto without = llama(json::object());
  without.erase("hidden_size");
  EXPECT_NE(refusal(without).find("lacks \"hidden_size\""), std::string::npos);
}

TEST_F(HfConfig, RefusesAModelLargerThanItsWeights) {
  // 10^5 layers of width 4096: refused from the weights file's size, not built.
  const std::string message = refusal(llama({{"num_hidden_layers", 100000},
                                             {"hidden_size", 4096},
                                             {"num_attention_heads", 32},
                                             {"intermediate_size", 11008}}));
  EXPECT_NE(message.find("parameters"), std::string::npos) << message;
  EXPECT_NE(message.find("its weights hold 2048"), std::string::npos) << message;
}

TEST_F(HfConfig, NullMeansUnset) {
  // transformers writes null for options left unset; the import then goes on to the weights.
  EXPECT_NE(
      refusal(llama({{"num_key_value_heads", nullptr}, {"head_dim", nullptr}})).find("describes"),
      std::string::npos);
}

// A folder of weights in shards, as save_pretrained writes a model above max_shard_size.
class HfShards : public HfFolder {
 protected:
  void index(const json& weight_map) const {
    write("model.safetensors.index.json",
          json{{"metadata", json::object()}, {"weight_map", weight_map}});
  }
};

TEST_F(HfShards, NamesWhatIsNotThere) {
  EXPECT_NE(refusal().find("is not a Hugging Face model folder (it has no config.json)"),
            std::string::npos);
  write("config.json", {{"model_type", "gpt2"},
                        {"vocab_size", 256},
                        {"n_embd", 8},
                        {"n_layer", 1},
                        {"n_head", 2},
                        {"n_positions", 16},
                        {"activation_function", "gelu"}});
  EXPECT_NE(refusal().find("has no model.safetensors (nor model.safetensors.index.json)"),
            std::string::npos);
  loom::write_file_atomic((hf_ / "pytorch_model.bin").string(), "pickle");
  EXPECT_NE(refusal().find("loom reads safetensors"), std::string::npos);
  index({{"wte.weight", "../elsewhere.safetensors"}});
  EXPECT_NE(refusal().find("not a file of the folder"), std::string::npos);
  index({{"wte.weight", "model-1.safetensors"}});
  loom::interop::write_safetensors((hf_ / "model-1.safetensors").string(),
                                   {{"wpe.weight", torch::zeros({16, 8})}});
  EXPECT_NE(refusal().find("lacks 'wte.weight', which model.safetensors.index.json places there"),
            std::string::npos);
}

}  // namespace

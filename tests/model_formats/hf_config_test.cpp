// read_hf_config: the golden transformers-5 configs (rope_parameters, dtype), hand-written
// transformers-4-style configs (rope_scaling, torch_dtype, generation_config.json eos override),
// and bad fields, each rejected naming config.json and the field.
#include "runners/model/formats/hf_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

// A Llama-3.1-8B-style config.json (transformers 4 spelling), which tests edit.
nlohmann::json llama31_config() {
  return nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "vocab_size": 128256})");
}

std::filesystem::path write_config(const nlohmann::json& config) {
  const auto dir = scratch_dir();
  write_text(dir / "config.json", config.dump(1));
  return dir;
}

void expect_config_error(const nlohmann::json& config, std::initializer_list<std::string> parts) {
  const auto dir = write_config(config);
  std::vector<std::string> all{(dir / "config.json").string()};
  all.insert(all.end(), parts.begin(), parts.end());
  try {
    (void)read_hf_config(dir);
    ADD_FAILURE() << "expected a ModelInputError";
  } catch (const ModelInputError& e) {
    for (const auto& part : all)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "missing '" << part << "' in: " << e.what();
  }
}

TEST(HfConfig, GoldenTinyLlamaTransformers5) {
  const auto c = read_hf_config(golden_dir() / "tiny-llama-bf16-sharded");
  EXPECT_EQ(c.architecture, Architecture::llama);
  EXPECT_EQ(c.architecture_name, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.rope.scaling, RopeScalingType::llama3);
  EXPECT_EQ(c.rope.factor, 8.0);
  EXPECT_EQ(c.rope.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 64);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2, 3}));
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.dtype, ComputeDtype::bf16);
}

TEST(HfConfig, GoldenTinyQwen2HasBiasesAndTiedEmbeddings) {
  const auto c = read_hf_config(golden_dir() / "tiny-qwen2-f32");
  EXPECT_EQ(c.architecture, Architecture::qwen2);
  EXPECT_TRUE(c.attention_bias);  // Qwen2Attention: q/k/v bias=True regardless of the config
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 8);  // hidden / heads (no head_dim field)
  EXPECT_EQ(c.rope.theta, 1000000.0);
  EXPECT_EQ(c.rope.scaling, RopeScalingType::none);
  EXPECT_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{6});
  EXPECT_EQ(c.dtype, ComputeDtype::f32);
}

TEST(HfConfig, Transformers4SpellingLlama31) {
  const auto c = read_hf_config(write_config(llama31_config()));
  EXPECT_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.rope.scaling, RopeScalingType::llama3);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_EQ(c.dtype, ComputeDtype::bf16);
}

TEST(HfConfig, GenerationConfigEosWins) {
  auto config = llama31_config();
  const auto dir = write_config(config);
  write_text(dir / "generation_config.json", R"({"bos_token_id": 128000, "eos_token_id": 128009})");
  EXPECT_EQ(read_hf_config(dir).eos_token_ids, std::vector<int>{128009});
}

TEST(HfConfig, DefaultsAndLegacyRopeType) {
  auto config = llama31_config();
  config.erase("head_dim");
  config.erase("num_key_value_heads");
  config.erase("rope_theta");
  config["rope_scaling"] = {{"type", "default"}};
  config["torch_dtype"] = "float16";
  const auto c = read_hf_config(write_config(config));
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_kv_heads, 32);
  EXPECT_EQ(c.rope.theta, 10000.0);
  EXPECT_EQ(c.rope.scaling, RopeScalingType::none);
  EXPECT_EQ(c.dtype, ComputeDtype::f32);  // float16 computes in f32 (documented in hf_config.h)
}

TEST(HfConfig, SlidingWindowDisabledOrLargeIsFine) {
  auto mistral = llama31_config();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral.erase("rope_scaling");
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(read_hf_config(write_config(mistral)).architecture, Architecture::mistral);
  mistral["sliding_window"] = 131072;
  EXPECT_NO_THROW((void)read_hf_config(write_config(mistral)));
  auto qwen = llama31_config();
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  qwen["use_sliding_window"] = false;
  qwen["sliding_window"] = 4096;
  EXPECT_NO_THROW((void)read_hf_config(write_config(qwen)));
}

TEST(HfConfigErrors, UnsupportedArchitecture) {
  auto config = llama31_config();
  config["architectures"] = {"GPT2LMHeadModel"};
  expect_config_error(config, {"'architectures'", "'GPT2LMHeadModel' is not supported"});
}

TEST(HfConfigErrors, FieldOfWrongType) {
  auto config = llama31_config();
  config["hidden_size"] = "4096";
  expect_config_error(config, {"'hidden_size'", "expected an integer", "string"});
}

TEST(HfConfigErrors, MissingRequiredField) {
  auto config = llama31_config();
  config.erase("vocab_size");
  expect_config_error(config, {"'vocab_size'", "missing"});
}

TEST(HfConfigErrors, NonPositiveSize) {
  auto config = llama31_config();
  config["num_hidden_layers"] = 0;
  expect_config_error(config, {"'num_hidden_layers'", "positive"});
}

TEST(HfConfigErrors, KvHeadsMustDivideHeads) {
  auto config = llama31_config();
  config["num_key_value_heads"] = 5;
  expect_config_error(config, {"'num_key_value_heads'", "5 does not divide"});
}

TEST(HfConfigErrors, UnsupportedRopeTypeInEitherSpelling) {
  auto config = llama31_config();
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_config_error(config, {"'rope_scaling.rope_type'", "'yarn' is not supported"});
  config.erase("rope_scaling");
  config["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e6}};
  expect_config_error(config, {"'rope_parameters.rope_type'", "'dynamic' is not supported"});
}

TEST(HfConfigErrors, Llama3RopeNeedsItsFactors) {
  auto config = llama31_config();
  config["rope_scaling"].erase("low_freq_factor");
  expect_config_error(config, {"'rope_scaling.low_freq_factor'", "missing"});
}

TEST(HfConfigErrors, ActiveSlidingWindow) {
  auto mistral = llama31_config();
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral.erase("rope_scaling");
  mistral.erase("sliding_window");  // MistralConfig defaults it to 4096
  expect_config_error(mistral, {"'sliding_window'", "4096", "not implemented"});
  auto qwen = llama31_config();
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 4096;
  qwen["max_window_layers"] = 4;
  expect_config_error(qwen, {"'sliding_window'", "not implemented"});
}

TEST(HfConfigErrors, UnsupportedDtype) {
  auto config = llama31_config();
  config["torch_dtype"] = "float8_e4m3fn";
  expect_config_error(config, {"'torch_dtype'", "'float8_e4m3fn' is not supported"});
}

TEST(HfConfigErrors, LlamaAttentionBiasTrue) {
  auto config = llama31_config();
  config["attention_bias"] = true;
  expect_config_error(config, {"'attention_bias'", "o_proj bias"});
}

TEST(HfConfigErrors, DuplicateKeyAndBadJson) {
  const auto dir = scratch_dir();
  write_text(dir / "config.json", R"({"hidden_size": 1, "hidden_size": 2})");
  expect_model_error([&] { (void)read_hf_config(dir); },
                     {(dir / "config.json").string(), "duplicate key 'hidden_size'"});
  write_text(dir / "config.json", R"({"hidden_size": )");
  expect_model_error([&] { (void)read_hf_config(dir); },
                     {(dir / "config.json").string(), "invalid JSON"});
}

TEST(HfConfigErrors, MissingConfigFile) {
  const auto dir = scratch_dir();
  expect_model_error([&] { (void)read_hf_config(dir); },
                     {(dir / "config.json").string(), "does not exist"});
}

}  // namespace
}  // namespace kvaudit::model::test

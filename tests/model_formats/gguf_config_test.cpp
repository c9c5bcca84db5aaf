// config_from_gguf: the golden tiny GGUFs (llama and qwen2), the default SmolLM2 GGUF (values
// checked against its own metadata; skipped with a reason when models/ lacks it), and metadata
// errors naming the file and the key.
#include "runners/model/formats/gguf_config.h"

#include <gtest/gtest.h>

#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

TEST(GgufConfig, GoldenTinyLlama) {
  const auto file = GgufFile::open(golden_dir() / "tiny-llama.gguf");
  const auto c = config_from_gguf(file);
  EXPECT_EQ(c.architecture, Architecture::llama);
  EXPECT_EQ(c.architecture_name, "llama");
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.intermediate_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_EQ(c.rms_norm_eps, static_cast<double>(1e-5f));  // stored as f32
  EXPECT_EQ(c.rope.theta, 500000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int>{2});
  EXPECT_EQ(c.dtype, ComputeDtype::f32);
}

TEST(GgufConfig, GoldenTinyQwen2TiedWithBiases) {
  const auto c = config_from_gguf(GgufFile::open(golden_dir() / "tiny-qwen2.gguf"));
  EXPECT_EQ(c.architecture, Architecture::qwen2);
  EXPECT_TRUE(c.tie_word_embeddings);  // no output.weight
  EXPECT_TRUE(c.attention_bias);       // blk.0.attn_q.bias present
  EXPECT_EQ(c.num_kv_heads, 1);
  EXPECT_EQ(c.rope.theta, 1000000.0);
}

TEST(GgufConfig, DefaultSmolLm2MatchesItsMetadata) {
  const std::filesystem::path path = KVAUDIT_DEFAULT_GGUF;
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << path << " is absent (models/ is not in git; tools/fetch_default_model.sh "
                 << "fetches it)";
  const auto file = GgufFile::open(path);
  const auto c = config_from_gguf(file);
  EXPECT_EQ(c.architecture, Architecture::llama);
  EXPECT_EQ(c.hidden_size, file.get_u32("llama.embedding_length"));
  EXPECT_EQ(c.num_layers, file.get_u32("llama.block_count"));
  EXPECT_EQ(c.intermediate_size, file.get_u32("llama.feed_forward_length"));
  EXPECT_EQ(c.num_heads, file.get_u32("llama.attention.head_count"));
  EXPECT_EQ(c.num_kv_heads, file.get_u32("llama.attention.head_count_kv"));
  EXPECT_EQ(c.head_dim, file.get_u32("llama.rope.dimension_count"));
  EXPECT_EQ(c.max_position_embeddings, file.get_u32("llama.context_length"));
  EXPECT_EQ(c.rms_norm_eps, file.get_f32("llama.attention.layer_norm_rms_epsilon"));
  EXPECT_EQ(c.rope.theta, file.get_f32("llama.rope.freq_base"));
  EXPECT_EQ(static_cast<std::uint64_t>(c.vocab_size), file.array_size("tokenizer.ggml.tokens"));
  EXPECT_EQ(c.bos_token_id, static_cast<int>(file.get_u32("tokenizer.ggml.bos_token_id")));
  EXPECT_EQ(c.eos_token_ids,
            std::vector<int>{static_cast<int>(file.get_u32("tokenizer.ggml.eos_token_id"))});
  EXPECT_EQ(c.pad_token_id, static_cast<int>(file.get_u32("tokenizer.ggml.padding_token_id")));
  EXPECT_TRUE(c.tie_word_embeddings);
  // The SmolLM2-135M architecture as published (config.json on the Hub).
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
}

// A GGUF with only metadata: general.architecture plus u32 keys and optional extra KVs.
std::filesystem::path metadata_only_gguf(
    const std::string& arch, const std::vector<std::pair<std::string, std::uint32_t>>& u32s,
    const std::vector<std::pair<std::string, std::string>>& strings = {}) {
  Bytes b = gguf_header(3, 0, 1 + u32s.size() + strings.size());
  b.str("general.architecture").u32(kString).str(arch);
  for (const auto& [key, value] : u32s) b.str(key).u32(kU32).u32(value);
  for (const auto& [key, value] : strings) b.str(key).u32(kString).str(value);
  return write_file(scratch_dir() / "meta.gguf", b.data());
}

std::vector<std::pair<std::string, std::uint32_t>> llama_sizes() {
  return {{"llama.context_length", 128},     {"llama.embedding_length", 64},
          {"llama.block_count", 1},          {"llama.feed_forward_length", 128},
          {"llama.attention.head_count", 4}, {"llama.attention.head_count_kv", 2}};
}

TEST(GgufConfigErrors, UnsupportedArchitecture) {
  const auto path = metadata_only_gguf("gpt2", {});
  expect_model_error([&] { (void)config_from_gguf(GgufFile::open(path)); },
                     {path.string(), "'general.architecture'", "'gpt2' is not supported"});
}

TEST(GgufConfigErrors, MissingRequiredKey) {
  auto sizes = llama_sizes();
  sizes.erase(sizes.begin() + 2);  // block_count
  const auto path = metadata_only_gguf("llama", sizes);
  expect_model_error([&] { (void)config_from_gguf(GgufFile::open(path)); },
                     {path.string(), "'llama.block_count'", "missing"});
}

TEST(GgufConfigErrors, MissingEpsilon) {
  const auto path = metadata_only_gguf("llama", llama_sizes());
  expect_model_error([&] { (void)config_from_gguf(GgufFile::open(path)); },
                     {path.string(), "'llama.attention.layer_norm_rms_epsilon'", "missing"});
}

TEST(GgufConfigErrors, PartialRotaryIsRejected) {
  auto sizes = llama_sizes();
  sizes.emplace_back("llama.rope.dimension_count", 8);  // head size is 16
  const auto path = metadata_only_gguf("llama", sizes);
  expect_model_error([&] { (void)config_from_gguf(GgufFile::open(path)); },
                     {path.string(), "'llama.rope.dimension_count'", "partial rotary"});
}

TEST(GgufConfigErrors, KvHeadsMustDivide) {
  auto sizes = llama_sizes();
  sizes.back().second = 3;
  const auto path = metadata_only_gguf("llama", sizes);
  expect_model_error([&] { (void)config_from_gguf(GgufFile::open(path)); },
                     {"'llama.attention.head_count_kv'", "3 does not divide"});
}

TEST(GgufConfigErrors, RopeScalingYarn) {
  Bytes b = gguf_header(3, 0, 9);
  b.str("general.architecture").u32(kString).str("llama");
  for (const auto& [key, value] : llama_sizes()) b.str(key).u32(kU32).u32(value);
  b.str("llama.attention.layer_norm_rms_epsilon").u32(kF32).f32(1e-5f);
  b.str("llama.rope.scaling.type").u32(kString).str("yarn");
  const auto path = write_file(scratch_dir() / "yarn.gguf", b.data());
  expect_model_error([&] { (void)config_from_gguf(GgufFile::open(path)); },
                     {path.string(), "'llama.rope.scaling.type'", "'yarn' is not supported"});
}

}  // namespace
}  // namespace kvaudit::model::test

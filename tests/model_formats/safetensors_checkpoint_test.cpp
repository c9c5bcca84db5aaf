// SafetensorsCheckpoint: the golden sharded (index.json) and single-file HF checkpoints, and broken
// indexes (shard name with '..' or '/', missing shard, tensor absent from its shard, unmapped shard
// tensor, no checkpoint at all).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "runners/model/formats/safetensors.h"
#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

namespace fs = std::filesystem;

// Copies the golden sharded checkpoint into a scratch directory and lets the test edit the index.
fs::path sharded_copy(const std::function<void(nlohmann::json&)>& edit_index) {
  const fs::path dir = scratch_dir() / "model";
  fs::copy(golden_dir() / "tiny-llama-bf16-sharded", dir, fs::copy_options::recursive);
  const fs::path index_path = dir / "model.safetensors.index.json";
  nlohmann::json index;
  {
    std::ifstream in(index_path);
    index = nlohmann::json::parse(in);
  }
  edit_index(index);
  write_text(index_path, index.dump(1));
  return dir;
}

TEST(SafetensorsCheckpoint, ShardedGoldenMapsEveryTensorToItsShard) {
  const fs::path dir = golden_dir() / "tiny-llama-bf16-sharded";
  const auto checkpoint = SafetensorsCheckpoint::open(dir);
  EXPECT_EQ(checkpoint.files().size(), 2u);
  EXPECT_EQ(checkpoint.names().size(), 21u);  // embed, 2 x 9 layer tensors, norm, lm_head
  EXPECT_TRUE(checkpoint.contains("lm_head.weight"));
  EXPECT_EQ(fs::path(checkpoint.file_of("lm_head.weight").source()).filename(),
            "model-00002-of-00002.safetensors");
  EXPECT_EQ(checkpoint.info("model.embed_tokens.weight").shape,
            (std::vector<std::int64_t>{64, 32}));
  EXPECT_EQ(checkpoint.to_f32("model.norm.weight").size(), 32u);
  expect_model_error([&] { (void)checkpoint.file_of("model.layers.7.mlp.up_proj.weight"); },
                     {dir.string(), "'model.layers.7.mlp.up_proj.weight'", "missing"});
}

TEST(SafetensorsCheckpoint, SingleFileGolden) {
  const auto checkpoint = SafetensorsCheckpoint::open(golden_dir() / "tiny-qwen2-f32");
  EXPECT_EQ(checkpoint.files().size(), 1u);
  EXPECT_TRUE(checkpoint.contains("model.layers.1.self_attn.k_proj.bias"));
}

TEST(SafetensorsCheckpoint, ShardNameWithDotDotIsRejected) {
  const auto dir = sharded_copy(
      [](nlohmann::json& index) { index["weight_map"]["lm_head.weight"] = "../evil.safetensors"; });
  expect_model_error([&] { (void)SafetensorsCheckpoint::open(dir); },
                     {"model.safetensors.index.json", "weight_map.lm_head.weight",
                      "'../evil.safetensors'", "plain file name"});
  const auto dir2 = sharded_copy(
      [](nlohmann::json& index) { index["weight_map"]["lm_head.weight"] = "..safetensors"; });
  expect_model_error([&] { (void)SafetensorsCheckpoint::open(dir2); }, {"'..safetensors'"});
}

TEST(SafetensorsCheckpoint, ShardWithSlashIsRejected) {
  const auto dir = sharded_copy([](nlohmann::json& index) {
    index["weight_map"]["lm_head.weight"] = "sub/model-00002-of-00002.safetensors";
  });
  expect_model_error([&] { (void)SafetensorsCheckpoint::open(dir); },
                     {"weight_map.lm_head.weight", "no '/'"});
}

TEST(SafetensorsCheckpoint, MissingShardIsNamed) {
  const auto dir = sharded_copy([](nlohmann::json&) {});
  fs::remove(dir / "model-00002-of-00002.safetensors");
  expect_model_error(
      [&] { (void)SafetensorsCheckpoint::open(dir); },
      {"model.safetensors.index.json", "'model-00002-of-00002.safetensors'", "does not exist"});
}

TEST(SafetensorsCheckpoint, MappedTensorAbsentFromItsShard) {
  const auto dir = sharded_copy([](nlohmann::json& index) {
    ASSERT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00002.safetensors");
    index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  });
  expect_model_error(
      [&] { (void)SafetensorsCheckpoint::open(dir); },
      {"weight_map.model.embed_tokens.weight", "has no tensor 'model.embed_tokens.weight'"});
}

TEST(SafetensorsCheckpoint, ShardTensorMissingFromIndex) {
  const auto dir =
      sharded_copy([](nlohmann::json& index) { index["weight_map"].erase("lm_head.weight"); });
  expect_model_error([&] { (void)SafetensorsCheckpoint::open(dir); },
                     {"model-00002-of-00002.safetensors", "'lm_head.weight'", "not mapped"});
}

TEST(SafetensorsCheckpoint, WeightMapMissing) {
  const auto dir = sharded_copy([](nlohmann::json& index) { index.erase("weight_map"); });
  expect_model_error([&] { (void)SafetensorsCheckpoint::open(dir); },
                     {"model.safetensors.index.json", "'weight_map' is missing"});
}

TEST(SafetensorsCheckpoint, NoCheckpointFiles) {
  const auto dir = scratch_dir();
  expect_model_error([&] { (void)SafetensorsCheckpoint::open(dir); },
                     {dir.string(), "no model.safetensors"});
}

}  // namespace
}  // namespace kvaudit::model::test

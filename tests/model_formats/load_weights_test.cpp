// load_model_weights: the golden tiny HF checkpoints (bf16 sharded Llama with llama3 rope; f32
// Qwen2 with biases and tied embeddings) and their GGUF conversions, compared tensor by tensor
// (SHA-256 of the f32 values) with what transformers holds -- for the GGUFs, with what transformers
// loads from them, which checks the llama Q/K un-permutation; the default SmolLM2 Q4_1 GGUF
// (skipped with a reason when absent); and missing tensors / wrong shapes named in the errors.
#include "runners/model/formats/load_weights.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "runners/model/bf16.h"
#include "tests/model_formats/format_bytes.h"

namespace kvaudit::model::test {
namespace {

namespace fs = std::filesystem;

const nlohmann::json& reference() {
  static const nlohmann::json ref = [] {
    std::ifstream in(golden_dir() / "reference.json");
    return nlohmann::json::parse(in);
  }();
  return ref;
}

// ModelWeights under HF tensor names (lm_head.weight is the output projection actually used).
std::map<std::string, const std::vector<float>*> by_hf_name(const ModelWeights& w) {
  std::map<std::string, const std::vector<float>*> m;
  m["model.embed_tokens.weight"] = &w.embed_tokens;
  m["model.norm.weight"] = &w.final_norm;
  m["lm_head.weight"] = &w.output_projection();
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const auto& l = w.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    m[p + "input_layernorm.weight"] = &l.input_norm;
    m[p + "self_attn.q_proj.weight"] = &l.q_proj;
    m[p + "self_attn.k_proj.weight"] = &l.k_proj;
    m[p + "self_attn.v_proj.weight"] = &l.v_proj;
    m[p + "self_attn.o_proj.weight"] = &l.o_proj;
    m[p + "post_attention_layernorm.weight"] = &l.post_attention_norm;
    m[p + "mlp.gate_proj.weight"] = &l.gate_proj;
    m[p + "mlp.up_proj.weight"] = &l.up_proj;
    m[p + "mlp.down_proj.weight"] = &l.down_proj;
    if (!l.q_bias.empty()) {
      m[p + "self_attn.q_proj.bias"] = &l.q_bias;
      m[p + "self_attn.k_proj.bias"] = &l.k_bias;
      m[p + "self_attn.v_proj.bias"] = &l.v_bias;
    }
  }
  return m;
}

// Every tensor of reference[key] must be present with the same values; when `all` every loaded
// tensor must be in the reference too.
void expect_matches_reference(const ModelWeights& weights, const std::string& key, bool all) {
  ASSERT_TRUE(reference().contains(key)) << key;
  const auto& tensors = reference()[key]["tensors"];
  const auto loaded = by_hf_name(weights);
  for (const auto& [name, entry] : tensors.items()) {
    SCOPED_TRACE(key + ": " + name);
    const auto it = loaded.find(name);
    ASSERT_NE(it, loaded.end()) << "not loaded";
    std::size_t count = 1;
    for (const auto& d : entry["shape"]) count *= d.get<std::size_t>();
    EXPECT_EQ(it->second->size(), count);
    EXPECT_EQ(sha256_f32(*it->second), entry["sha256"].get<std::string>());
  }
  if (all) {
    EXPECT_EQ(loaded.size(), tensors.size());
  }
}

TEST(LoadWeightsGolden, TinyLlamaBf16Sharded) {
  const auto dir = golden_dir() / "tiny-llama-bf16-sharded";
  const auto w = load_model_weights(dir);
  EXPECT_EQ(w.source, dir.string());
  EXPECT_EQ(w.config.dtype, ComputeDtype::bf16);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_TRUE(w.layers[0].q_bias.empty());
  EXPECT_FALSE(w.lm_head.empty());
  for (const float v : w.layers[1].q_proj) EXPECT_EQ(v, round_to_bf16(v));  // bf16-exact
  expect_matches_reference(w, "tiny-llama-bf16-sharded", /*all=*/true);
}

TEST(LoadWeightsGolden, TinyLlamaGgufIsUnpermutedLikeTransformers) {
  const auto w = load_model_weights(golden_dir() / "tiny-llama.gguf");
  EXPECT_EQ(w.config.dtype, ComputeDtype::f32);
  expect_matches_reference(w, "tiny-llama.gguf", /*all=*/true);
  // ... which are the HF weights themselves.
  const auto hf = load_model_weights(golden_dir() / "tiny-llama-bf16-sharded");
  EXPECT_EQ(w.layers[0].q_proj, hf.layers[0].q_proj);
  EXPECT_EQ(w.layers[1].k_proj, hf.layers[1].k_proj);
}

TEST(LoadWeightsGolden, TinyQwen2BiasesAndTiedEmbeddings) {
  const auto w = load_model_weights(golden_dir() / "tiny-qwen2-f32");
  EXPECT_TRUE(w.config.tie_word_embeddings);
  EXPECT_TRUE(w.lm_head.empty());
  EXPECT_EQ(&w.output_projection(), &w.embed_tokens);
  ASSERT_EQ(w.layers[0].k_bias.size(), 8u);  // 1 kv head x head_dim 8
  expect_matches_reference(w, "tiny-qwen2-f32", /*all=*/true);
  const auto g = load_model_weights(golden_dir() / "tiny-qwen2.gguf");
  expect_matches_reference(g, "tiny-qwen2.gguf", /*all=*/true);
  EXPECT_EQ(g.layers[1].q_bias, w.layers[1].q_bias);  // qwen2: no permutation
}

// Copies a golden HF directory into scratch space and edits its config.json.
fs::path golden_copy_with_config(const std::string& name,
                                 const std::function<void(nlohmann::json&)>& edit) {
  const fs::path dir = scratch_dir() / name;
  fs::copy(golden_dir() / name, dir, fs::copy_options::recursive);
  nlohmann::json config;
  {
    std::ifstream in(dir / "config.json");
    config = nlohmann::json::parse(in);
  }
  edit(config);
  write_text(dir / "config.json", config.dump(1));
  return dir;
}

TEST(LoadWeightsGolden, DtypeFromCheckpointWhenConfigHasNone) {
  const auto llama = golden_copy_with_config("tiny-llama-bf16-sharded",
                                             [](nlohmann::json& c) { c.erase("dtype"); });
  EXPECT_EQ(load_model_weights(llama).config.dtype, ComputeDtype::bf16);  // BF16 tensors
  const auto qwen =
      golden_copy_with_config("tiny-qwen2-f32", [](nlohmann::json& c) { c.erase("dtype"); });
  EXPECT_EQ(load_model_weights(qwen).config.dtype, ComputeDtype::f32);
}

TEST(LoadWeightsGolden, Bf16ConfigRoundsF32TensorsLikeHfCast) {
  const auto dir =
      golden_copy_with_config("tiny-qwen2-f32", [](nlohmann::json& c) { c["dtype"] = "bfloat16"; });
  const auto rounded = load_model_weights(dir);
  const auto original = load_model_weights(golden_dir() / "tiny-qwen2-f32");
  EXPECT_EQ(rounded.config.dtype, ComputeDtype::bf16);
  ASSERT_EQ(rounded.layers[0].q_proj.size(), original.layers[0].q_proj.size());
  std::size_t changed = 0;
  for (std::size_t i = 0; i < original.layers[0].q_proj.size(); ++i) {
    EXPECT_EQ(rounded.layers[0].q_proj[i], round_to_bf16(original.layers[0].q_proj[i]));
    changed += rounded.layers[0].q_proj[i] != original.layers[0].q_proj[i];
  }
  EXPECT_GT(changed, 0u);  // random f32 weights are not bf16-exact
}

TEST(LoadWeightsGolden, DefaultSmolLm2Q4_1) {
  const fs::path path = KVAUDIT_DEFAULT_GGUF;
  if (!fs::exists(path))
    GTEST_SKIP() << path << " is absent (models/ is not in git; tools/fetch_default_model.sh "
                 << "fetches it)";
  const auto w = load_model_weights(path);
  const auto& c = w.config;
  ASSERT_EQ(w.layers.size(), 30u);
  EXPECT_EQ(w.embed_tokens.size(), 49152u * 576u);
  EXPECT_EQ(w.layers[0].q_proj.size(), 576u * 576u);
  EXPECT_EQ(w.layers[0].k_proj.size(), 192u * 576u);
  EXPECT_EQ(w.layers[0].down_proj.size(), 576u * 1536u);
  EXPECT_EQ(w.final_norm.size(), static_cast<std::size_t>(c.hidden_size));
  EXPECT_TRUE(w.lm_head.empty());
  // Q8_0 embeddings, Q4_1 projections and F32 norms against transformers' own GGUF load.
  // The committed reference.json has the SmolLM2 hashes: an entry gone missing is a failure.
  expect_matches_reference(w, "smollm2-135m-instruct-q4_1.gguf", /*all=*/false);
}

// ---- hand-built checkpoints with errors ----

struct Tensor {
  std::string name;
  std::vector<std::int64_t> shape;
};

// A safetensors file of F32 tensors (values 0, 1, 2, ...).
void write_f32_safetensors(const fs::path& path, const std::vector<Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<std::uint8_t> buffer;
  for (const auto& t : tensors) {
    std::size_t count = 1;
    for (const auto d : t.shape) count *= static_cast<std::size_t>(d);
    const std::size_t begin = buffer.size();
    for (std::size_t i = 0; i < count; ++i) {
      const float v = static_cast<float>(i);
      const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
      buffer.insert(buffer.end(), p, p + 4);
    }
    header[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {begin, buffer.size()}}};
  }
  write_file(path, safetensors_bytes(header.dump(), buffer));
}

// hidden 4, intermediate 8, 1 layer, 2 heads of 2, 1 kv head, vocab 8, f32, untied.
constexpr const char* kTinyConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 4,
  "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
  "num_key_value_heads": 1, "vocab_size": 8, "max_position_embeddings": 16,
  "rms_norm_eps": 1e-5, "torch_dtype": "float32", "tie_word_embeddings": false})";

std::vector<Tensor> tiny_tensors() {
  const std::string p = "model.layers.0.";
  return {{"model.embed_tokens.weight", {8, 4}},
          {p + "input_layernorm.weight", {4}},
          {p + "self_attn.q_proj.weight", {4, 4}},
          {p + "self_attn.k_proj.weight", {2, 4}},
          {p + "self_attn.v_proj.weight", {2, 4}},
          {p + "self_attn.o_proj.weight", {4, 4}},
          {p + "post_attention_layernorm.weight", {4}},
          {p + "mlp.gate_proj.weight", {8, 4}},
          {p + "mlp.up_proj.weight", {8, 4}},
          {p + "mlp.down_proj.weight", {4, 8}},
          {"model.norm.weight", {4}},
          {"lm_head.weight", {8, 4}}};
}

fs::path tiny_hf_dir(const std::function<void(std::vector<Tensor>&)>& edit) {
  const auto dir = scratch_dir() / "model";
  fs::create_directories(dir);
  write_text(dir / "config.json", kTinyConfig);
  auto tensors = tiny_tensors();
  edit(tensors);
  write_f32_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

TEST(LoadWeightsHandBuilt, ValidTinyCheckpointLoads) {
  const auto w = load_model_weights(tiny_hf_dir([](auto&) {}));
  EXPECT_EQ(w.config.dtype, ComputeDtype::f32);
  EXPECT_EQ(w.layers[0].k_proj, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(LoadWeightsHandBuilt, MissingTensorIsNamed) {
  const auto dir = tiny_hf_dir([](auto& t) {
    std::erase_if(t, [](const Tensor& x) { return x.name == "model.layers.0.mlp.up_proj.weight"; });
  });
  expect_model_error([&] { (void)load_model_weights(dir); },
                     {dir.string(), "'model.layers.0.mlp.up_proj.weight'", "missing"});
}

TEST(LoadWeightsHandBuilt, UntiedModelNeedsLmHead) {
  const auto dir = tiny_hf_dir([](auto& t) {
    std::erase_if(t, [](const Tensor& x) { return x.name == "lm_head.weight"; });
  });
  expect_model_error([&] { (void)load_model_weights(dir); }, {"'lm_head.weight'", "missing"});
}

TEST(LoadWeightsHandBuilt, ShapeMismatchVsConfig) {
  const auto dir = tiny_hf_dir([](auto& t) {
    for (auto& x : t)
      if (x.name == "model.layers.0.self_attn.k_proj.weight") x.shape = {4, 4};
  });
  expect_model_error(
      [&] { (void)load_model_weights(dir); },
      {(dir / "model.safetensors").string(), "'model.layers.0.self_attn.k_proj.weight'",
       "expected shape [2, 4]", "found [4, 4]"});
}

TEST(LoadWeightsHandBuilt, BadConfigField) {
  const auto dir = tiny_hf_dir([](auto&) {});
  write_text(dir / "config.json", std::string(kTinyConfig)
                                      .replace(std::string(kTinyConfig).find("\"vocab_size\": 8"),
                                               15, "\"vocab_size\": -8"));
  expect_model_error([&] { (void)load_model_weights(dir); },
                     {(dir / "config.json").string(), "'vocab_size'", "positive"});
}

TEST(LoadWeightsHandBuilt, ShardNameWithDotDot) {
  const auto dir = tiny_hf_dir([](auto&) {});
  fs::rename(dir / "model.safetensors", dir / "model-00001-of-00001.safetensors");
  nlohmann::json index = {{"metadata", nlohmann::json::object()},
                          {"weight_map", nlohmann::json::object()}};
  for (const auto& t : tiny_tensors())
    index["weight_map"][t.name] = "model-00001-of-00001.safetensors";
  index["weight_map"]["model.norm.weight"] = "../model/model-00001-of-00001.safetensors";
  write_text(dir / "model.safetensors.index.json", index.dump());
  expect_model_error(
      [&] { (void)load_model_weights(dir); },
      {"model.safetensors.index.json", "weight_map.model.norm.weight", "plain file name"});
}

// A GGUF llama with the tiny shapes above; `edit` may rename or reshape tensors (ne in ggml order).
fs::path tiny_gguf(const std::function<void(std::vector<Tensor>&)>& edit) {
  const std::vector<std::pair<std::string, std::uint32_t>> sizes{
      {"llama.context_length", 16},      {"llama.embedding_length", 4},
      {"llama.block_count", 1},          {"llama.feed_forward_length", 8},
      {"llama.attention.head_count", 2}, {"llama.attention.head_count_kv", 1}};
  const std::string p = "blk.0.";
  std::vector<Tensor> tensors{{"token_embd.weight", {4, 8}}, {p + "attn_norm.weight", {4}},
                              {p + "attn_q.weight", {4, 4}}, {p + "attn_k.weight", {4, 2}},
                              {p + "attn_v.weight", {4, 2}}, {p + "attn_output.weight", {4, 4}},
                              {p + "ffn_norm.weight", {4}},  {p + "ffn_gate.weight", {4, 8}},
                              {p + "ffn_up.weight", {4, 8}}, {p + "ffn_down.weight", {8, 4}},
                              {"output_norm.weight", {4}}};
  edit(tensors);
  Bytes b = gguf_header(3, tensors.size(), sizes.size() + 2);
  b.str("general.architecture").u32(kString).str("llama");
  for (const auto& [key, value] : sizes) b.str(key).u32(kU32).u32(value);
  b.str("llama.attention.layer_norm_rms_epsilon").u32(kF32).f32(1e-5f);
  std::uint64_t offset = 0;
  std::vector<std::uint64_t> sizes_in_bytes;
  for (const auto& t : tensors) {
    b.str(t.name).u32(static_cast<std::uint32_t>(t.shape.size()));
    std::uint64_t count = 1;
    for (const auto d : t.shape) {
      b.u64(static_cast<std::uint64_t>(d));
      count *= static_cast<std::uint64_t>(d);
    }
    b.u32(kGgmlF32).u64(offset);
    sizes_in_bytes.push_back(count * 4);
    offset += (count * 4 + 31) / 32 * 32;
  }
  b.pad_to(32);
  for (const auto size : sizes_in_bytes) b.zeros(size).pad_to(32);
  return write_file(scratch_dir() / "tiny.gguf", b.data());
}

TEST(LoadWeightsHandBuilt, TinyGgufLoadsTied) {
  const auto w = load_model_weights(tiny_gguf([](auto&) {}));
  EXPECT_TRUE(w.config.tie_word_embeddings);
  EXPECT_EQ(w.layers[0].k_proj.size(), 8u);
}

TEST(LoadWeightsHandBuilt, GgufShapeMismatch) {
  const auto path = tiny_gguf([](auto& t) {
    for (auto& x : t)
      if (x.name == "blk.0.ffn_down.weight") x.shape = {4, 8};  // transposed
  });
  expect_model_error(
      [&] { (void)load_model_weights(path); },
      {path.string(), "'blk.0.ffn_down.weight'", "expected shape [4, 8]", "found [8, 4]"});
}

TEST(LoadWeightsHandBuilt, GgufMissingTensor) {
  const auto path = tiny_gguf([](auto& t) { t.erase(t.begin() + 3); });  // attn_k
  expect_model_error([&] { (void)load_model_weights(path); },
                     {path.string(), "'blk.0.attn_k.weight'", "missing"});
}

TEST(LoadWeightsHandBuilt, NotAModelPath) {
  const auto dir = scratch_dir();
  const auto other = write_text(dir / "weights.bin", "x");
  expect_model_error([&] { (void)load_model_weights(other); }, {other.string(), "not a model"});
  expect_model_error([&] { (void)load_model_weights(dir / "absent"); },
                     {(dir / "absent").string(), "does not exist"});
}

}  // namespace
}  // namespace kvaudit::model::test

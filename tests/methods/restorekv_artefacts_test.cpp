// The RestoreKV artefact readers (methods/restorekv_artefacts.h): the real tiny artefacts of
// tests/golden/artefacts/restorekv_tiny_* (written by peft's save_pretrained) read and spot-checked
// against Python's safetensors, the model-fit check against the tiny models' config.json, and one
// refusal per rule of docs/design/restorekv.md "The adapter: PEFT LoRA file format" on small
// hand-made files.
#include "methods/restorekv_artefacts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSource = KVAUDIT_SOURCE_DIR;
const std::string kPrefix = "base_model.model.model.layers.";

// ---- safetensors bytes by hand ----------------------------------------------------------------

struct RawTensor {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::vector<unsigned char> data;  // little-endian
};

RawTensor f32(std::vector<std::int64_t> shape, const std::vector<float>& values) {
  RawTensor t{"F32", std::move(shape), std::vector<unsigned char>(values.size() * 4)};
  if (!values.empty())  // (an empty tensor: no bytes; memcpy must not get a null pointer)
    std::memcpy(t.data.data(), values.data(), t.data.size());  // little-endian host
  return t;
}

// `count` values 0.25·(k+1) (exact in BF16 and F16 too for small k).
RawTensor f32_filled(std::vector<std::int64_t> shape) {
  std::int64_t count = 1;
  for (const auto n : shape) count *= n;
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::size_t k = 0; k < values.size(); ++k) values[k] = 0.25f * static_cast<float>(k + 1);
  return f32(std::move(shape), values);
}

RawTensor half_bits(const std::string& dtype, std::vector<std::int64_t> shape,
                    const std::vector<std::uint16_t>& bits) {
  RawTensor t{dtype, std::move(shape), {}};
  for (const std::uint16_t b : bits) {
    t.data.push_back(static_cast<unsigned char>(b & 0xff));
    t.data.push_back(static_cast<unsigned char>(b >> 8));
  }
  return t;
}

std::vector<unsigned char> safetensors_bytes(const std::map<std::string, RawTensor>& tensors) {
  std::string header = "{";
  std::vector<unsigned char> data;
  for (const auto& [name, t] : tensors) {
    std::string shape;
    for (std::size_t k = 0; k < t.shape.size(); ++k)
      shape += (k ? "," : "") + std::to_string(t.shape[k]);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"" +
              t.dtype + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + t.data.size()) +
              "]}";
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  header += "}";
  std::vector<unsigned char> out;
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<unsigned char>((n >> (8 * i)) & 0xff));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

void write_file(const fs::path& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// ---- a small adapter: hidden 4, query width 4, KV width 2, intermediate 6, r = 2 -------------

constexpr int kRank = 2;

std::pair<int, int> toy_in_out(LoraTarget t) {
  switch (t) {
    case LoraTarget::q_proj:
    case LoraTarget::o_proj:
      return {4, 4};
    case LoraTarget::k_proj:
    case LoraTarget::v_proj:
      return {4, 2};
    case LoraTarget::gate_proj:
    case LoraTarget::up_proj:
      return {4, 6};
    case LoraTarget::down_proj:
      return {6, 4};
  }
  return {0, 0};
}

bool in_attention(LoraTarget t) {
  return t == LoraTarget::q_proj || t == LoraTarget::k_proj || t == LoraTarget::v_proj ||
         t == LoraTarget::o_proj;
}

std::string key(int layer, LoraTarget t, char ab) {
  return kPrefix + std::to_string(layer) + (in_attention(t) ? ".self_attn." : ".mlp.") +
         std::string(lora_target_name(t)) + ".lora_" + ab + ".weight";
}

const std::set<LoraTarget> kQv = {LoraTarget::q_proj, LoraTarget::v_proj};
const std::set<LoraTarget> kAll = {LoraTarget::q_proj,   LoraTarget::k_proj,    LoraTarget::v_proj,
                                   LoraTarget::o_proj,   LoraTarget::gate_proj, LoraTarget::up_proj,
                                   LoraTarget::down_proj};

std::map<std::string, RawTensor> toy_tensors(int layers, const std::set<LoraTarget>& targets) {
  std::map<std::string, RawTensor> t;
  for (int l = 0; l < layers; ++l)
    for (const LoraTarget m : targets) {
      const auto [in, out] = toy_in_out(m);
      t[key(l, m, 'A')] = f32_filled({kRank, in});
      t[key(l, m, 'B')] = f32_filled({out, kRank});
    }
  return t;
}

// The tiny llama's real adapter_config.json (every field peft 0.21.2 writes), with r = 2,
// lora_alpha = 4 and the given targets.
json toy_config(const std::set<LoraTarget>& targets) {
  std::ifstream in(kSource + "/tests/golden/artefacts/restorekv_tiny_llama/adapter_config.json");
  json config = json::parse(in);
  config["r"] = kRank;
  config["lora_alpha"] = 4;
  config["target_modules"] = json::array();
  for (const LoraTarget t : targets) config["target_modules"].push_back(lora_target_name(t));
  return config;
}

std::string error_of(const std::string& config_text, const std::map<std::string, RawTensor>& t) {
  try {
    (void)parse_lora_adapter(config_text, safetensors_bytes(t), "adapter");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const json& config, const std::map<std::string, RawTensor>& t) {
  return error_of(config.dump(), t);
}

std::string config_error(const json& config) { return error_of(config, toy_tensors(2, kQv)); }

std::string embeddings_error(const std::map<std::string, RawTensor>& t) {
  try {
    (void)parse_restore_embeddings(safetensors_bytes(t), "emb", nullptr, nullptr);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "message: " << (text)

class RestoreKvArtefacts : public ::testing::Test {
 protected:
  void SetUp() override {
    // Per process and test: ctest may run this test and its parser.-prefixed twin at once.
    dir_ = fs::temp_directory_path() /
           ("kvaudit_restorekv_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // An adapter directory under the scratch directory holding the given files (an empty string
  // for a file: not written).
  std::string adapter_dir(const std::string& name, const std::string& config,
                          const std::vector<unsigned char>& weights) {
    const fs::path dir = dir_ / name;
    fs::create_directories(dir);
    if (!config.empty()) write_file(dir / "adapter_config.json", config);
    if (!weights.empty()) write_file(dir / "adapter_model.safetensors", weights);
    return dir.string();
  }

  fs::path dir_;
};

std::string error_of_adapter_check(const std::string& dir) {
  try {
    check_restorekv_adapter_dir(dir);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string error_of_embeddings_check(const std::string& path) {
  try {
    check_restore_embeddings_file(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// ---- the real tiny artefacts ------------------------------------------------------------------

struct TinyExpectation {
  const char* model;
  float down_a_l1_3_100;  // layers.1.mlp.down_proj.lora_A.weight[3, 100]
  float k_b_l0_31_7;      // layers.0.self_attn.k_proj.lora_B.weight[31, 7]
  float embedding_7_63;   // restore_embeddings[7, 63]
};

// Obtained once with tools/.venv-kvpress/bin/python: safetensors.numpy.load_file(<file>)[<name>]
// [row, column] (np.float32 repr).
const TinyExpectation kTiny[] = {
    {"llama", 0.0076996465f, 0.02587629f, 0.020197717f},
    {"llama3_rope", 0.020081542f, 0.042280473f, 0.2605845f},
    {"qwen2", 0.05755958f, -0.09160473f, -0.16398127f},
    {"mistral", -0.021873208f, 0.2698553f, 0.41292316f},
};

std::string tiny_dir(const std::string& model) {
  return kSource + "/tests/golden/artefacts/restorekv_tiny_" + model;
}

// The model's shape from its config.json (tests/golden/tiny_models/<model>/f32).
RestoreModelShape tiny_model_shape(const std::string& model) {
  std::ifstream in(kSource + "/tests/golden/tiny_models/" + model + "/f32/config.json");
  const json c = json::parse(in);
  const int heads = c.at("num_attention_heads").get<int>();
  const int head_dim =
      c.contains("head_dim") ? c.at("head_dim").get<int>() : c.at("hidden_size").get<int>() / heads;
  return {.num_layers = c.at("num_hidden_layers").get<int>(),
          .hidden_size = c.at("hidden_size").get<int>(),
          .q_width = heads * head_dim,
          .kv_width = c.at("num_key_value_heads").get<int>() * head_dim,
          .intermediate_size = c.at("intermediate_size").get<int>()};
}

TEST_F(RestoreKvArtefacts, ReadsTheTinyArtefactsAsPythonSafetensorsDoes) {
  for (const TinyExpectation& e : kTiny) {
    SCOPED_TRACE(e.model);
    const std::string dir = tiny_dir(e.model);
    const RestoreArtefacts a =
        read_restorekv_artefacts(dir + "/restore_embeddings.safetensors", dir);
    EXPECT_EQ(a.tokens, 8);
    EXPECT_EQ(a.hidden_size, 64);
    ASSERT_EQ(a.embeddings.size(), 8u * 64u);
    EXPECT_EQ(a.embeddings[7 * 64 + 63], e.embedding_7_63);
    EXPECT_EQ(a.adapter.rank, 8);
    EXPECT_EQ(a.adapter.scaling, 2.0);  // lora_alpha 16 / r 8
    ASSERT_EQ(a.adapter.layers.size(), 2u);
    for (const auto& layer : a.adapter.layers) {
      std::set<LoraTarget> targets;
      for (const auto& [t, m] : layer) {
        targets.insert(t);
        EXPECT_EQ(m.a.size(), static_cast<std::size_t>(8 * m.in_features));
        EXPECT_EQ(m.b.size(), static_cast<std::size_t>(m.out_features * 8));
      }
      EXPECT_EQ(targets, kAll);
    }
    const LoraModule& down = a.adapter.layers[1].at(LoraTarget::down_proj);
    EXPECT_EQ(down.in_features, 128);
    EXPECT_EQ(down.out_features, 64);
    EXPECT_EQ(down.a[3 * 128 + 100], e.down_a_l1_3_100);
    const LoraModule& k = a.adapter.layers[0].at(LoraTarget::k_proj);
    EXPECT_EQ(k.in_features, 64);
    EXPECT_EQ(k.out_features, 32);
    EXPECT_EQ(k.b[31 * 8 + 7], e.k_b_l0_31_7);
    EXPECT_EQ(error_of_adapter_check(dir), "");
    EXPECT_EQ(error_of_embeddings_check(dir + "/restore_embeddings.safetensors"), "");
  }
}

TEST_F(RestoreKvArtefacts, FitsTheTinyModelsAndRefusesOtherShapes) {
  for (const TinyExpectation& e : kTiny) {
    SCOPED_TRACE(e.model);
    const std::string dir = tiny_dir(e.model);
    const RestoreArtefacts a =
        read_restorekv_artefacts(dir + "/restore_embeddings.safetensors", dir);
    EXPECT_NO_THROW(check_restorekv_fits(a, tiny_model_shape(e.model)));
  }
  const std::string dir = tiny_dir("llama");
  const RestoreArtefacts a = read_restorekv_artefacts(dir + "/restore_embeddings.safetensors", dir);
  const RestoreModelShape llama = tiny_model_shape("llama");
  EXPECT_EQ(llama.num_layers, 2);
  EXPECT_EQ(llama.hidden_size, 64);
  EXPECT_EQ(llama.q_width, 64);
  EXPECT_EQ(llama.kv_width, 32);
  EXPECT_EQ(llama.intermediate_size, 128);
  const auto error_for = [&](RestoreModelShape shape) {
    try {
      check_restorekv_fits(a, shape);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  RestoreModelShape layers = llama;
  layers.num_layers = 3;
  EXPECT_EQ(error_for(layers), "adapter: LoRA weights for 2 layers, the model has 3");
  RestoreModelShape hidden = llama;
  hidden.hidden_size = 32;
  EXPECT_EQ(error_for(hidden), "restore_embeddings: hidden size 64 differs from the model's 32");
  RestoreModelShape kv = llama;
  kv.kv_width = 16;
  EXPECT_EQ(error_for(kv),
            "adapter: layer 0 k_proj maps 64 -> 32, the model's k_proj maps 64 -> 16");
  RestoreModelShape intermediate = llama;
  intermediate.intermediate_size = 96;
  EXPECT_EQ(error_for(intermediate),
            "adapter: layer 0 gate_proj maps 64 -> 128, the model's gate_proj maps 64 -> 96");
  RestoreModelShape q = llama;
  q.q_width = 128;
  EXPECT_EQ(error_for(q),
            "adapter: layer 0 q_proj maps 64 -> 64, the model's q_proj maps 64 -> 128");
}

// ---- the adapter: values, dtypes, scaling -----------------------------------------------------

TEST_F(RestoreKvArtefacts, ReadsAHandMadeAdapterInEveryFloatDtype) {
  auto tensors = toy_tensors(2, kQv);
  // layer 1 v_proj in BF16 and F16: 1.5 is 0x3FC0 in BF16 and 0x3E00 in F16; -2 is 0xC000 / 0xC000.
  tensors[key(1, LoraTarget::v_proj, 'A')] =
      half_bits("BF16", {2, 4}, {0x3FC0, 0xC000, 0, 0, 0, 0, 0, 0x3F80});
  tensors[key(1, LoraTarget::v_proj, 'B')] = half_bits("F16", {2, 2}, {0x3E00, 0xC000, 0x3C00, 0});
  const LoraAdapter a =
      parse_lora_adapter(toy_config(kQv).dump(), safetensors_bytes(tensors), "adapter");
  EXPECT_EQ(a.rank, 2);
  EXPECT_EQ(a.scaling, 2.0);  // 4 / 2
  ASSERT_EQ(a.layers.size(), 2u);
  ASSERT_EQ(a.layers[0].size(), 2u);
  const LoraModule& q = a.layers[0].at(LoraTarget::q_proj);
  EXPECT_EQ(q.in_features, 4);
  EXPECT_EQ(q.out_features, 4);
  EXPECT_EQ(q.a, (std::vector<float>{0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f, 2}));
  const LoraModule& v = a.layers[1].at(LoraTarget::v_proj);
  EXPECT_EQ(v.a, (std::vector<float>{1.5f, -2, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(v.b, (std::vector<float>{1.5f, -2, 1, 0}));
  EXPECT_EQ(v.out_features, 2);
}

TEST_F(RestoreKvArtefacts, UseRsloraMustBeABooleanAndScalesBySqrtR) {
  json config = toy_config(kQv);
  config["use_rslora"] = true;
  const LoraAdapter a =
      parse_lora_adapter(config.dump(), safetensors_bytes(toy_tensors(1, kQv)), "adapter");
  EXPECT_EQ(a.scaling, 4.0 / std::sqrt(2.0));
  config["use_rslora"] = "yes";
  EXPECT_EQ(config_error(config),
            "adapter: adapter_config.json: use_rslora: must be true or false, not \"yes\"");
  config.erase("use_rslora");  // peft's default: false
  EXPECT_EQ(
      parse_lora_adapter(config.dump(), safetensors_bytes(toy_tensors(1, kQv)), "adapter").scaling,
      2.0);
}

// ---- adapter_config.json ----------------------------------------------------------------------

TEST_F(RestoreKvArtefacts, ConfigMustBeAStrictJsonObject) {
  const auto tensors = toy_tensors(1, kQv);
  EXPECT_HAS(error_of(std::string("{\"r\": 2,}"), tensors),
             "adapter: adapter_config.json: not valid JSON");
  EXPECT_HAS(error_of(std::string("{\"r\": 2 /* rank */}"), tensors),
             "adapter: adapter_config.json: not valid JSON");
  EXPECT_HAS(error_of(std::string("{\"r\": NaN}"), tensors),
             "adapter: adapter_config.json: not valid JSON");
  EXPECT_EQ(error_of(std::string("[1, 2]"), tensors),
            "adapter: adapter_config.json: not a JSON object");
  std::string twice = toy_config(kQv).dump();
  twice.insert(1, "\"r\": 4, ");
  EXPECT_EQ(error_of(twice, tensors),
            "adapter: adapter_config.json: r: appears twice (JSON keys must be unique)");
}

TEST_F(RestoreKvArtefacts, PeftTypeMustBeLora) {
  json config = toy_config(kQv);
  config["peft_type"] = "IA3";
  EXPECT_EQ(config_error(config),
            "adapter: adapter_config.json: peft_type: is \"IA3\"; a RestoreKV adapter is a LoRA "
            "(\"LORA\")");
  config.erase("peft_type");
  EXPECT_EQ(config_error(config), "adapter: adapter_config.json: peft_type: missing");
}

TEST_F(RestoreKvArtefacts, RankMustBeAPositiveInteger) {
  for (const json& bad : {json(0), json(-2), json(2.0), json("2"), json(true), json(4294967296)}) {
    json config = toy_config(kQv);
    config["r"] = bad;
    EXPECT_EQ(config_error(config),
              "adapter: adapter_config.json: r: must be an integer >= 1, not " + bad.dump());
  }
  json config = toy_config(kQv);
  config.erase("r");
  EXPECT_EQ(config_error(config), "adapter: adapter_config.json: r: missing");
}

TEST_F(RestoreKvArtefacts, LoraAlphaMustBeANumber) {
  json config = toy_config(kQv);
  config["lora_alpha"] = "16";
  EXPECT_EQ(config_error(config),
            "adapter: adapter_config.json: lora_alpha: must be a number, not \"16\"");
  config["lora_alpha"] = 3.5;
  EXPECT_EQ(
      parse_lora_adapter(config.dump(), safetensors_bytes(toy_tensors(1, kQv)), "adapter").scaling,
      1.75);
  config.erase("lora_alpha");
  EXPECT_EQ(config_error(config), "adapter: adapter_config.json: lora_alpha: missing");
}

TEST_F(RestoreKvArtefacts, TargetModulesMustListKnownNames) {
  const std::string field = "adapter: adapter_config.json: target_modules: ";
  for (const char* pattern : {"all-linear", ".*\\.(q|v)_proj"}) {
    json config = toy_config(kQv);
    config["target_modules"] = pattern;
    const std::string error = config_error(config);
    EXPECT_HAS(error, field + "is the string");
    EXPECT_HAS(error, "\"all-linear\" and regular expressions are not supported");
  }
  json config = toy_config(kQv);
  config["target_modules"] = {"q_proj", "lm_head"};
  EXPECT_EQ(config_error(config), field +
                                      "\"lm_head\" is not one of q_proj, k_proj, v_proj, o_proj, "
                                      "gate_proj, up_proj, down_proj");
  config["target_modules"] = {"q_proj", 3};
  EXPECT_HAS(config_error(config), field + "3 is not one of");
  config["target_modules"] = json::array();
  EXPECT_EQ(config_error(config), field + "is empty");
  config["target_modules"] = json::object();
  EXPECT_EQ(config_error(config), field + "must be a list of module names");
  config.erase("target_modules");
  EXPECT_EQ(config_error(config), "adapter: adapter_config.json: target_modules: missing");
  // Duplicates name one module (peft turns the list into a set).
  config["target_modules"] = {"v_proj", "q_proj", "q_proj"};
  EXPECT_EQ(config_error(config), "");
}

TEST_F(RestoreKvArtefacts, FeaturesKvauditDoesNotImplementAreRefusedByName) {
  // field, a value that is refused, values that are accepted (peft's "off").
  struct Case {
    const char* field;
    json refused;
    std::vector<json> accepted;
  };
  const std::vector<Case> cases = {
      {"fan_in_fan_out", true, {false}},
      {"bias", "lora_only", {"none"}},
      {"bias", "all", {"none"}},
      {"lora_bias", true, {false}},
      {"use_dora", true, {false}},
      {"use_qalora", true, {false}},
      {"rank_pattern", {{"q_proj", 4}}, {json::object(), nullptr}},
      {"alpha_pattern", {{"v_proj", 32}}, {json::object(), nullptr}},
      {"modules_to_save", {"lm_head"}, {nullptr, json::array()}},
      {"trainable_token_indices", {5, 6}, {nullptr, json::array(), json::object()}},
      {"target_parameters", {"mlp.experts.down_proj"}, {nullptr, json::array()}},
      {"layer_replication", {{0, 2}}, {nullptr, json::array()}},
      {"layers_to_transform", {0}, {nullptr, json::array()}},
      {"layers_to_transform", 0, {nullptr}},
      {"layers_pattern", "layers", {nullptr, "", json::array()}},
      {"exclude_modules", {"q_proj"}, {nullptr, "", json::array()}},
      {"alora_invocation_tokens", {1, 2}, {nullptr, json::array()}},
      {"use_bdlora", json::object(), {nullptr, false}},
      {"use_bdlora", true, {nullptr}},
      {"arrow_config", json::object(), {nullptr}},
      {"kasa_config", {{"r", 2}}, {nullptr}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.field) + " = " + c.refused.dump());
    json config = toy_config(kQv);
    config[c.field] = c.refused;
    EXPECT_HAS(config_error(config),
               std::string("adapter: adapter_config.json: ") + c.field + ": ");
    for (const json& ok : c.accepted) {
      config[c.field] = ok;
      EXPECT_EQ(config_error(config), "") << c.field << " = " << ok.dump();
    }
    config.erase(c.field);
    EXPECT_EQ(config_error(config), "") << c.field << " absent";
  }
  json config = toy_config(kQv);
  config["bias"] = "all";
  EXPECT_EQ(config_error(config),
            "adapter: adapter_config.json: bias: is \"all\"; only \"none\" is supported (no "
            "trained biases)");
  config = toy_config(kQv);
  config["use_dora"] = true;
  EXPECT_EQ(config_error(config),
            "adapter: adapter_config.json: use_dora: is true (DoRA, weight-decomposed LoRA); "
            "kvaudit does not support it");
  config["use_dora"] = 1;
  EXPECT_EQ(config_error(config),
            "adapter: adapter_config.json: use_dora: must be true or false, not 1");
  config = toy_config(kQv);
  config["modules_to_save"] = {"lm_head"};
  EXPECT_EQ(config_error(config),
            "adapter: adapter_config.json: modules_to_save: is [\"lm_head\"]; must be null or "
            "empty (it trains and saves whole modules)");
}

TEST_F(RestoreKvArtefacts, UnknownAndIgnoredFieldsAreIgnored) {
  json config = toy_config(kQv);
  config["some_future_peft_field"] = {{"anything", 1}};
  config["init_lora_weights"] = "gaussian";
  config["lora_dropout"] = 0.1;
  config["task_type"] = nullptr;
  EXPECT_EQ(config_error(config), "");
}

// ---- adapter_model.safetensors ----------------------------------------------------------------

TEST_F(RestoreKvArtefacts, KeysOtherThanLoraWeightsAreRefused) {
  const json config = toy_config(kQv);
  for (const std::string& other :
       {std::string("lm_head.weight"), std::string("base_model.model.model.embed_tokens.weight"),
        kPrefix + "0.self_attn.q_proj.lora_A.default.weight",  // still carrying an adapter name
        kPrefix + "0.self_attn.q_proj.lora_magnitude_vector",  // DoRA
        kPrefix + "0.self_attn.q_proj.lora_embedding_A",       // embedding LoRA
        kPrefix + "00.self_attn.q_proj.lora_A.weight",         // not a canonical index
        kPrefix + "-1.self_attn.q_proj.lora_A.weight",
        kPrefix + "0.mlp.q_proj.lora_A.weight",  // q_proj lives in self_attn
        std::string("model.layers.0.self_attn.q_proj.lora_A.weight")}) {
    SCOPED_TRACE(other);
    auto tensors = toy_tensors(1, kQv);
    tensors[other] = f32_filled({2, 4});
    EXPECT_HAS(error_of(config, tensors), "adapter: adapter_model.safetensors: tensor '" + other +
                                              "': not a LoRA weight kvaudit reads");
  }
}

TEST_F(RestoreKvArtefacts, ModuleOutsideTargetModulesIsRefused) {
  auto tensors = toy_tensors(2, kQv);
  tensors.merge(toy_tensors(2, {LoraTarget::up_proj}));
  EXPECT_EQ(error_of(toy_config(kQv), tensors),
            "adapter: adapter_model.safetensors: tensor '" + key(0, LoraTarget::up_proj, 'A') +
                "': up_proj is not in adapter_config.json's target_modules");
}

TEST_F(RestoreKvArtefacts, EveryAHasItsBAndEveryBItsA) {
  auto no_b = toy_tensors(2, kQv);
  no_b.erase(key(1, LoraTarget::v_proj, 'B'));
  EXPECT_EQ(error_of(toy_config(kQv), no_b), "adapter: adapter_model.safetensors: tensor '" +
                                                 key(1, LoraTarget::v_proj, 'B') +
                                                 "' is missing (every lora_A needs its lora_B)");
  auto no_a = toy_tensors(2, kQv);
  no_a.erase(key(0, LoraTarget::q_proj, 'A'));
  EXPECT_EQ(error_of(toy_config(kQv), no_a), "adapter: adapter_model.safetensors: tensor '" +
                                                 key(0, LoraTarget::q_proj, 'A') +
                                                 "' is missing (every lora_B needs its lora_A)");
}

TEST_F(RestoreKvArtefacts, ShapesMustBeRByInAndOutByR) {
  const json config = toy_config(kQv);
  auto wrong_r_a = toy_tensors(1, kQv);
  wrong_r_a[key(0, LoraTarget::q_proj, 'A')] = f32_filled({3, 4});
  EXPECT_EQ(error_of(config, wrong_r_a),
            "adapter: adapter_model.safetensors: tensor '" + key(0, LoraTarget::q_proj, 'A') +
                "' has shape [3, 4], expected [2, in_features] (lora_A, r = 2 from "
                "adapter_config.json)");
  auto wrong_r_b = toy_tensors(1, kQv);
  wrong_r_b[key(0, LoraTarget::v_proj, 'B')] = f32_filled({2, 3});
  EXPECT_EQ(error_of(config, wrong_r_b),
            "adapter: adapter_model.safetensors: tensor '" + key(0, LoraTarget::v_proj, 'B') +
                "' has shape [2, 3], expected [out_features, 2] (lora_B, r = 2 from "
                "adapter_config.json)");
  // A saved as B's layout (transposed): [in, r] instead of [r, in].
  auto transposed = toy_tensors(1, kQv);
  transposed[key(0, LoraTarget::q_proj, 'A')] = f32_filled({4, 2});
  EXPECT_HAS(error_of(config, transposed), "' has shape [4, 2], expected [2, in_features]");
  auto rank1 = toy_tensors(1, kQv);
  rank1[key(0, LoraTarget::q_proj, 'B')] = f32_filled({8});
  EXPECT_HAS(error_of(config, rank1), "' has shape [8], expected [out_features, 2]");
  auto empty = toy_tensors(1, kQv);
  empty[key(0, LoraTarget::q_proj, 'B')] = f32_filled({0, 2});
  EXPECT_HAS(error_of(config, empty), "' has shape [0, 2], expected [out_features, 2]");
}

TEST_F(RestoreKvArtefacts, LayersMustBeNumberedContiguously) {
  auto gap = toy_tensors(3, kQv);
  for (const LoraTarget t : kQv)
    for (const char ab : {'A', 'B'}) gap.erase(key(1, t, ab));
  EXPECT_EQ(error_of(toy_config(kQv), gap),
            "adapter: adapter_model.safetensors: the LoRA layers are not numbered 0..2");
  EXPECT_EQ(error_of(toy_config(kQv), {}),
            "adapter: adapter_model.safetensors: holds no LoRA weights");
}

TEST_F(RestoreKvArtefacts, EveryTargetedModuleIsInEveryLayer) {
  auto partial = toy_tensors(2, kQv);
  partial.erase(key(1, LoraTarget::q_proj, 'A'));
  partial.erase(key(1, LoraTarget::q_proj, 'B'));
  EXPECT_EQ(error_of(toy_config(kQv), partial),
            "adapter: adapter_model.safetensors: layer 1 has no q_proj weights, though "
            "target_modules lists it (peft would keep its initial weights there)");
}

TEST_F(RestoreKvArtefacts, ShapesMustAgreeAcrossLayers) {
  auto other = toy_tensors(2, kQv);
  other[key(1, LoraTarget::v_proj, 'B')] = f32_filled({4, 2});
  EXPECT_EQ(error_of(toy_config(kQv), other),
            "adapter: adapter_model.safetensors: tensor '" + key(1, LoraTarget::v_proj, 'A') +
                "': v_proj maps 4 -> 4 in layer 1 but 4 -> 2 in layer 0");
}

TEST_F(RestoreKvArtefacts, WidthsOfOneModelQuantityMustAgree) {
  auto hidden = toy_tensors(1, kAll);
  hidden[key(0, LoraTarget::down_proj, 'B')] = f32_filled({5, 2});
  EXPECT_EQ(error_of(toy_config(kAll), hidden),
            "adapter: adapter_model.safetensors: q_proj in_features 4 and down_proj out_features 5 "
            "differ; both are the model's hidden size");
  auto kv = toy_tensors(1, kAll);
  kv[key(0, LoraTarget::v_proj, 'B')] = f32_filled({3, 2});
  EXPECT_EQ(error_of(toy_config(kAll), kv),
            "adapter: adapter_model.safetensors: k_proj out_features 2 and v_proj out_features 3 "
            "differ; both are the model's KV width (KV heads x head_dim)");
  auto intermediate = toy_tensors(1, kAll);
  intermediate[key(0, LoraTarget::down_proj, 'A')] = f32_filled({2, 7});
  EXPECT_HAS(error_of(toy_config(kAll), intermediate),
             "gate_proj out_features 6 and down_proj in_features 7 differ; both are the model's "
             "intermediate size");
  EXPECT_EQ(error_of(toy_config(kAll), toy_tensors(1, kAll)), "");
}

TEST_F(RestoreKvArtefacts, OtherDtypesAndNonFiniteValuesAreRefused) {
  auto ints = toy_tensors(1, kQv);
  ints[key(0, LoraTarget::q_proj, 'A')].dtype = "I32";
  EXPECT_EQ(error_of(toy_config(kQv), ints), "adapter: adapter_model.safetensors: tensor '" +
                                                 key(0, LoraTarget::q_proj, 'A') +
                                                 "' has dtype I32; F32, F16 or BF16 is required");
  auto nan = toy_tensors(1, kQv);
  nan[key(0, LoraTarget::v_proj, 'B')] = f32({2, 2}, {1, 2, std::nanf(""), 4});
  EXPECT_HAS(error_of(toy_config(kQv), nan), "holds a non-finite value at flat index 2");
  std::vector<unsigned char> truncated = safetensors_bytes(toy_tensors(1, kQv));
  truncated.resize(truncated.size() - 1);
  try {
    (void)parse_lora_adapter(toy_config(kQv).dump(), truncated, "adapter");
    ADD_FAILURE() << "read a truncated file";
  } catch (const std::invalid_argument& e) {
    EXPECT_HAS(e.what(), "adapter: adapter_model.safetensors: tensor '");
    EXPECT_HAS(e.what(), "lie outside the data buffer");
  }
}

// ---- the adapter directory --------------------------------------------------------------------

TEST_F(RestoreKvArtefacts, AdapterDirectoryMustHoldConfigAndSafetensors) {
  const std::string config = toy_config(kQv).dump();
  const std::vector<unsigned char> weights = safetensors_bytes(toy_tensors(2, kQv));
  const std::string ok = adapter_dir("ok", config, weights);
  EXPECT_EQ(error_of_adapter_check(ok), "");

  const std::string bin_only = adapter_dir("bin_only", config, {});
  write_file(fs::path(bin_only) / "adapter_model.bin", std::string("PK\x03\x04"));
  EXPECT_EQ(error_of_adapter_check(bin_only),
            "adapter_model.safetensors: missing; the directory holds only adapter_model.bin (a "
            "pickled adapter) and kvaudit reads safetensors (save the adapter with "
            "safe_serialization=True)");
  EXPECT_EQ(error_of_adapter_check(adapter_dir("nothing", "", {})),
            "adapter_model.safetensors: missing");
  EXPECT_EQ(error_of_adapter_check(adapter_dir("no_config", "", weights)),
            "adapter_config.json: missing");
  EXPECT_HAS(error_of_adapter_check((dir_ / "absent").string()), "not a directory");
  const std::string file = (dir_ / "a_file").string();
  write_file(file, std::string("x"));
  EXPECT_HAS(error_of_adapter_check(file), "not a directory");

  // The plan-time check leaves the path out; reading names it first.
  json bad = toy_config(kQv);
  bad["r"] = 0;
  const std::string bad_dir = adapter_dir("bad", bad.dump(), weights);
  EXPECT_EQ(error_of_adapter_check(bad_dir),
            "adapter_config.json: r: must be an integer >= 1, not 0");
  const std::string emb = (dir_ / "emb.safetensors").string();
  write_file(emb, safetensors_bytes({{"restore_embeddings", f32_filled({2, 4})}}));
  try {
    (void)read_restorekv_artefacts(emb, bad_dir);
    ADD_FAILURE() << "read an adapter with r = 0";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              bad_dir + ": adapter_config.json: r: must be an integer >= 1, not 0");
  }
  const RestoreArtefacts a = read_restorekv_artefacts(emb, ok);
  EXPECT_EQ(a.tokens, 2);
  EXPECT_EQ(a.hidden_size, 4);
  EXPECT_EQ(a.adapter.layers.size(), 2u);
  EXPECT_NO_THROW(check_restorekv_fits(
      a, {.num_layers = 2, .hidden_size = 4, .q_width = 4, .kv_width = 2, .intermediate_size = 6}));
}

// ---- restore_embeddings.safetensors -----------------------------------------------------------

TEST_F(RestoreKvArtefacts, RestoreEmbeddingsFileHoldsExactlyOneTwoDimensionalTensor) {
  int tokens = 0;
  int hidden = 0;
  const std::vector<float> e = parse_restore_embeddings(
      safetensors_bytes({{"restore_embeddings", half_bits("BF16", {1, 3}, {0x3FC0, 0xC000, 0})}}),
      "emb", &tokens, &hidden);
  EXPECT_EQ(tokens, 1);
  EXPECT_EQ(hidden, 3);
  EXPECT_EQ(e, (std::vector<float>{1.5f, -2, 0}));

  const std::string only_one =
      "; a RestoreKV embeddings file holds exactly one tensor, 'restore_embeddings' [restore "
      "tokens, hidden size]";
  EXPECT_EQ(embeddings_error({{"embeddings", f32_filled({2, 4})}}),
            "emb: holds the tensors 'embeddings'" + only_one);
  EXPECT_EQ(
      embeddings_error({{"restore_embeddings", f32_filled({2, 4})}, {"extra", f32_filled({1})}}),
      "emb: holds the tensors 'extra', 'restore_embeddings'" + only_one);
  EXPECT_EQ(embeddings_error({}), "emb: holds no tensors" + only_one);
  const std::string shape = "emb: tensor 'restore_embeddings' has shape ";
  const std::string expected = ", expected [restore tokens >= 1, hidden size >= 1]";
  EXPECT_EQ(embeddings_error({{"restore_embeddings", f32_filled({8})}}), shape + "[8]" + expected);
  EXPECT_EQ(embeddings_error({{"restore_embeddings", f32_filled({1, 2, 4})}}),
            shape + "[1, 2, 4]" + expected);
  EXPECT_EQ(embeddings_error({{"restore_embeddings", f32_filled({0, 4})}}),
            shape + "[0, 4]" + expected);
  EXPECT_EQ(embeddings_error({{"restore_embeddings", f32_filled({4, 0})}}),
            shape + "[4, 0]" + expected);
  auto ints = f32_filled({2, 2});
  ints.dtype = "I32";
  EXPECT_EQ(embeddings_error({{"restore_embeddings", ints}}),
            "emb: tensor 'restore_embeddings' has dtype I32; F32, F16 or BF16 is required");

  // The plan-time check leaves the path out.
  const std::string path = (dir_ / "bad.safetensors").string();
  write_file(path, safetensors_bytes({{"restore_embeddings", f32_filled({8})}}));
  EXPECT_EQ(error_of_embeddings_check(path),
            "tensor 'restore_embeddings' has shape [8]" + expected);
  EXPECT_EQ(error_of_embeddings_check((dir_ / "absent.safetensors").string()),
            "cannot open the file");
  write_file(path, std::string("not safetensors"));
  EXPECT_HAS(error_of_embeddings_check(path), "safetensors header length");
}

}  // namespace
}  // namespace kvaudit::methods

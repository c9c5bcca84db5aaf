// load_model_weights: HF safetensors directories and GGUF files -> ModelWeights, with every
// tensor's shape checked against the config (tensor names and layout rules in load_weights.h).
#include "runners/model/formats/load_weights.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runners/model/bf16.h"
#include "runners/model/formats/gguf.h"
#include "runners/model/formats/gguf_config.h"
#include "runners/model/formats/hf_config.h"
#include "runners/model/formats/qk_permutation.h"
#include "runners/model/formats/safetensors.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {

namespace {

using Shape = std::vector<std::int64_t>;

std::string weight_shape_text(const Shape& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void check_shape(const std::string& file, const std::string& tensor, const Shape& expected,
                 const Shape& actual) {
  if (expected != actual)
    throw ModelInputError(file + ": tensor '" + tensor + "': expected shape " +
                          weight_shape_text(expected) + " (from the model config), found " +
                          weight_shape_text(actual));
}

// The shapes every source format must match, in PyTorch order.
struct ExpectedShapes {
  Shape embed, norm, q, kv, o, gate_up, down, lm_head, q_bias, kv_bias;
  explicit ExpectedShapes(const ModelConfig& c) {
    const std::int64_t hidden = c.hidden_size;
    const std::int64_t q_rows = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
    const std::int64_t kv_rows = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;
    embed = {c.vocab_size, hidden};
    norm = {hidden};
    q = {q_rows, hidden};
    kv = {kv_rows, hidden};
    o = {hidden, q_rows};
    gate_up = {c.intermediate_size, hidden};
    down = {hidden, c.intermediate_size};
    lm_head = {c.vocab_size, hidden};
    q_bias = {q_rows};
    kv_bias = {kv_rows};
  }
};

// Per-layer tensor names of one format.
struct LayerNames {
  std::string input_norm, q, k, v, q_bias, k_bias, v_bias, o, post_norm, gate, up, down;
};

// Fills `weights` (config already set) through `load(name, expected_shape)`, which returns the
// f32 values after checking the shape.
void fill_weights(ModelWeights& weights, const std::string& embed_name,
                  const std::function<LayerNames(int)>& layer_names,
                  const std::string& final_norm_name, const std::string& lm_head_name,
                  const std::function<std::vector<float>(const std::string&, const Shape&)>& load) {
  const ModelConfig& c = weights.config;
  const ExpectedShapes shapes(c);
  weights.embed_tokens = load(embed_name, shapes.embed);
  weights.layers.resize(static_cast<std::size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    const LayerNames n = layer_names(i);
    LayerWeights& layer = weights.layers[static_cast<std::size_t>(i)];
    layer.input_norm = load(n.input_norm, shapes.norm);
    layer.q_proj = load(n.q, shapes.q);
    layer.k_proj = load(n.k, shapes.kv);
    layer.v_proj = load(n.v, shapes.kv);
    if (c.attention_bias) {
      layer.q_bias = load(n.q_bias, shapes.q_bias);
      layer.k_bias = load(n.k_bias, shapes.kv_bias);
      layer.v_bias = load(n.v_bias, shapes.kv_bias);
    }
    layer.o_proj = load(n.o, shapes.o);
    layer.post_attention_norm = load(n.post_norm, shapes.norm);
    layer.gate_proj = load(n.gate, shapes.gate_up);
    layer.up_proj = load(n.up, shapes.gate_up);
    layer.down_proj = load(n.down, shapes.down);
  }
  weights.final_norm = load(final_norm_name, shapes.norm);
  if (!c.tie_word_embeddings) weights.lm_head = load(lm_head_name, shapes.lm_head);
}

bool has_suffix(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ModelWeights load_hf_weights(const std::filesystem::path& model_dir) {
  ModelWeights weights;
  weights.source = model_dir.string();
  const HfConfigFile config_file = read_hf_config_file(model_dir);
  weights.config = config_file.config;
  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(model_dir);
  if (!config_file.dtype_declared) {
    const auto& embed = checkpoint.info("model.embed_tokens.weight");
    weights.config.dtype =
        embed.dtype == SafetensorsDtype::BF16 ? ComputeDtype::bf16 : ComputeDtype::f32;
  }
  const bool round_bf16 = weights.config.dtype == ComputeDtype::bf16;
  auto load = [&](const std::string& name, const Shape& expected) {
    const SafetensorsFile& file = checkpoint.file_of(name);
    check_shape(file.source(), name, expected, file.info(name).shape);
    std::vector<float> values = file.to_f32(name);
    // A bf16 model computes on bf16 weights: HF casts non-bf16 tensors on load (a no-op for a
    // bf16 checkpoint, whose values widen exactly).
    if (round_bf16 && file.info(name).dtype != SafetensorsDtype::BF16)
      for (float& v : values) v = round_to_bf16(v);
    return values;
  };
  auto layer_names = [](int i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    return LayerNames{p + "input_layernorm.weight",
                      p + "self_attn.q_proj.weight",
                      p + "self_attn.k_proj.weight",
                      p + "self_attn.v_proj.weight",
                      p + "self_attn.q_proj.bias",
                      p + "self_attn.k_proj.bias",
                      p + "self_attn.v_proj.bias",
                      p + "self_attn.o_proj.weight",
                      p + "post_attention_layernorm.weight",
                      p + "mlp.gate_proj.weight",
                      p + "mlp.up_proj.weight",
                      p + "mlp.down_proj.weight"};
  };
  fill_weights(weights, "model.embed_tokens.weight", layer_names, "model.norm.weight",
               "lm_head.weight", load);
  return weights;
}

ModelWeights load_gguf_weights(const std::filesystem::path& gguf_path) {
  ModelWeights weights;
  weights.source = gguf_path.string();
  const GgufFile file = GgufFile::open(gguf_path);
  weights.config = config_from_gguf(file);
  const ModelConfig& c = weights.config;
  // llama.cpp permutes Q/K rows of llama-arch models for interleaved RoPE; undo it like
  // transformers' LlamaTensorProcessor (n_head = num_heads for Q, num_kv_heads for K).
  const bool unpermute = c.architecture == Architecture::llama;
  auto load = [&](const std::string& name, const Shape& expected) {
    const GgufTensorInfo& info = file.tensor(name);
    check_shape(file.source(), name, expected, info.torch_shape());
    std::vector<float> values = file.tensor_to_f32(name);
    if (unpermute) {
      const bool is_q = name.find(".attn_q.") != std::string::npos;
      const bool is_k = name.find(".attn_k.") != std::string::npos;
      if (is_q || is_k) {
        const auto rows = static_cast<std::size_t>(expected[0]);
        const std::size_t cols = expected.size() > 1 ? static_cast<std::size_t>(expected[1]) : 1;
        const auto heads = static_cast<std::size_t>(is_q ? c.num_heads : c.num_kv_heads);
        reverse_gguf_qk_permutation(values, rows, cols, heads);
      }
    }
    return values;
  };
  auto layer_names = [](int i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    return LayerNames{p + "attn_norm.weight", p + "attn_q.weight",      p + "attn_k.weight",
                      p + "attn_v.weight",    p + "attn_q.bias",        p + "attn_k.bias",
                      p + "attn_v.bias",      p + "attn_output.weight", p + "ffn_norm.weight",
                      p + "ffn_gate.weight",  p + "ffn_up.weight",      p + "ffn_down.weight"};
  };
  fill_weights(weights, "token_embd.weight", layer_names, "output_norm.weight", "output.weight",
               load);
  return weights;
}

ModelWeights load_model_weights(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw ModelInputError(path.string() + ": model path does not exist");
  if (std::filesystem::is_directory(status)) return load_hf_weights(path);
  if (has_suffix(path.filename().string(), ".gguf")) return load_gguf_weights(path);
  throw ModelInputError(path.string() + ": not a model: expected an HF model directory " +
                        "(config.json + safetensors) or a .gguf file");
}

}  // namespace kvaudit::model

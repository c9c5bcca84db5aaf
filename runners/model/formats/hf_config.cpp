// read_hf_config: config.json (+ generation_config.json) -> ModelConfig. The field mapping,
// defaults and the checks are listed in hf_config.h; defaults follow transformers' LlamaConfig /
// MistralConfig / Qwen2Config and modeling_rope_utils (`default_theta` = 10000,
// `convert_rope_params_to_dict`: a legacy `rope_scaling` wins over `rope_parameters`, and
// rope_parameters.rope_theta over the top-level rope_theta).
#include "runners/model/formats/hf_config.h"

#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "runners/model/formats/mapped_file.h"
#include "runners/model/formats/strict_json.h"
#include "runners/model/model_error.h"

namespace kvaudit::model {

namespace {

using nlohmann::json;

// Reads typed fields of one JSON object; errors name the file and the field.
class FieldReader {
 public:
  FieldReader(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw ModelInputError(source_ + ": field '" + prefix_ + field + "': " + what);
  }

  const json* find(const std::string& field) const {
    const auto it = object_.find(field);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string& field) const { return find(field) != nullptr; }

  std::int64_t integer(const std::string& field, const json& value) const {
    if (!value.is_number_integer())
      fail(field, "expected an integer, found " + json_type_name(value) + " " + value.dump());
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX)
      fail(field, "value " + value.dump() + " is too large");
    return value.get<std::int64_t>();
  }

  // A required positive integer that fits an int.
  int positive_int(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) fail(field, "is missing (required)");
    return checked_positive_int(field, *value);
  }
  int checked_positive_int(const std::string& field, const json& value) const {
    const auto v = integer(field, value);
    if (v <= 0 || v > INT_MAX)
      fail(field, "must be a positive integer (at most " + std::to_string(INT_MAX) + "), found " +
                      std::to_string(v));
    return static_cast<int>(v);
  }
  std::optional<int> optional_positive_int(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) return std::nullopt;
    return checked_positive_int(field, *value);
  }
  std::optional<int> optional_token_id(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) return std::nullopt;
    const auto v = integer(field, *value);
    if (v < 0 || v > INT_MAX) fail(field, "token id " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  }
  // An int or a list of ints (eos_token_id); empty when absent/null.
  std::vector<int> token_id_list(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) return {};
    std::vector<int> ids;
    if (value->is_array()) {
      for (const auto& element : *value) {
        const auto v = integer(field, element);
        if (v < 0 || v > INT_MAX) fail(field, "token id " + std::to_string(v) + " is out of range");
        ids.push_back(static_cast<int>(v));
      }
      return ids;
    }
    ids.push_back(*optional_token_id(field));
    return ids;
  }
  double positive_number(const std::string& field, double default_value) const {
    const json* value = find(field);
    if (value == nullptr) return default_value;
    if (!value->is_number())
      fail(field, "expected a number, found " + json_type_name(*value) + " " + value->dump());
    const double v = value->get<double>();
    if (!(v > 0.0) || !std::isfinite(v))
      fail(field, "must be a positive finite number, found " + value->dump());
    return v;
  }
  bool boolean(const std::string& field, bool default_value) const {
    const json* value = find(field);
    if (value == nullptr) return default_value;
    if (!value->is_boolean())
      fail(field, "expected true or false, found " + json_type_name(*value) + " " + value->dump());
    return value->get<bool>();
  }
  std::optional<std::string> string(const std::string& field) const {
    const json* value = find(field);
    if (value == nullptr) return std::nullopt;
    if (!value->is_string())
      fail(field, "expected a string, found " + json_type_name(*value) + " " + value->dump());
    return value->get<std::string>();
  }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

json read_json_file(const std::filesystem::path& path) {
  const MappedFile file(path);
  const auto bytes = file.bytes();
  const json value = parse_json_strict(
      std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
  if (!value.is_object())
    throw ModelInputError(path.string() + ": expected a JSON object, found " +
                          json_type_name(value));
  return value;
}

void read_rope(const FieldReader& top, const std::string& source, ModelConfig& out) {
  // Which object holds the rope parameters: legacy rope_scaling wins (transformers 5 does the
  // same).
  const json* scaling = top.find("rope_scaling");
  std::string object_name = "rope_scaling";
  if (scaling == nullptr) {
    scaling = top.find("rope_parameters");
    object_name = "rope_parameters";
  }
  out.rope.theta = top.positive_number("rope_theta", 10000.0);
  if (scaling == nullptr) return;
  if (!scaling->is_object())
    top.fail(object_name, "expected an object, found " + json_type_name(*scaling));
  const FieldReader rope(*scaling, source, object_name + ".");
  // Nested per-layer-type parameters (transformers 5 for mixed attention models) are not ours.
  for (const auto& [key, value] : scaling->items())
    if (value.is_object()) rope.fail(key, "per-layer-type rope parameters are not supported");
  out.rope.theta = rope.positive_number("rope_theta", out.rope.theta);
  std::string type = "default";
  if (const auto t = rope.string("rope_type"))
    type = *t;
  else if (const auto legacy = rope.string("type"))
    type = *legacy;
  if (const json* partial = rope.find("partial_rotary_factor");
      partial != nullptr && !(partial->is_number() && partial->get<double>() == 1.0))
    rope.fail("partial_rotary_factor",
              "partial rotary embeddings are not supported (found " + partial->dump() + ")");
  if (type == "default") {
    out.rope.scaling = RopeScalingType::none;
  } else if (type == "llama3") {
    out.rope.scaling = RopeScalingType::llama3;
    for (const char* required : {"factor", "low_freq_factor", "high_freq_factor"})
      if (!rope.has(required)) rope.fail(required, "is missing (required for rope_type llama3)");
    out.rope.factor = rope.positive_number("factor", 1.0);
    out.rope.low_freq_factor = rope.positive_number("low_freq_factor", 1.0);
    out.rope.high_freq_factor = rope.positive_number("high_freq_factor", 4.0);
    if (!(out.rope.high_freq_factor > out.rope.low_freq_factor))
      rope.fail("high_freq_factor", "must be greater than low_freq_factor");
    out.rope.original_max_position_embeddings =
        rope.optional_positive_int("original_max_position_embeddings")
            .value_or(static_cast<int>(out.max_position_embeddings));
  } else {
    rope.fail(rope.has("rope_type") ? "rope_type" : "type",
              "rope type '" + type +
                  "' is not supported (supported: default, llama3; yarn, dynamic, linear, "
                  "longrope and others are not implemented)");
  }
}

}  // namespace

ModelConfig read_hf_config(const std::filesystem::path& model_dir) {
  return read_hf_config_file(model_dir).config;
}

HfConfigFile read_hf_config_file(const std::filesystem::path& model_dir) {
  const auto config_path = model_dir / "config.json";
  const std::string source = config_path.string();
  const json config = read_json_file(config_path);
  const FieldReader top(config, source);
  ModelConfig out;

  // Architecture.
  const json* architectures = top.find("architectures");
  if (architectures == nullptr) top.fail("architectures", "is missing (required)");
  if (!architectures->is_array() || architectures->empty() || !(*architectures)[0].is_string())
    top.fail("architectures",
             "expected a non-empty list of strings, found " + architectures->dump());
  out.architecture_name = (*architectures)[0].get<std::string>();
  if (out.architecture_name == "LlamaForCausalLM")
    out.architecture = Architecture::llama;
  else if (out.architecture_name == "Qwen2ForCausalLM")
    out.architecture = Architecture::qwen2;
  else if (out.architecture_name == "MistralForCausalLM")
    out.architecture = Architecture::mistral;
  else
    top.fail("architectures", "architecture '" + out.architecture_name +
                                  "' is not supported (supported: LlamaForCausalLM, "
                                  "Qwen2ForCausalLM, MistralForCausalLM)");

  if (const auto act = top.string("hidden_act"); act && *act != "silu")
    top.fail("hidden_act", "activation '" + *act + "' is not supported (expected silu)");

  // Sizes.
  out.hidden_size = top.positive_int("hidden_size");
  out.intermediate_size = top.positive_int("intermediate_size");
  out.num_layers = top.positive_int("num_hidden_layers");
  out.num_heads = top.positive_int("num_attention_heads");
  out.num_kv_heads = top.optional_positive_int("num_key_value_heads").value_or(out.num_heads);
  out.vocab_size = top.positive_int("vocab_size");
  out.max_position_embeddings = top.positive_int("max_position_embeddings");
  if (out.num_heads % out.num_kv_heads != 0)
    top.fail("num_key_value_heads", std::to_string(out.num_kv_heads) +
                                        " does not divide num_attention_heads " +
                                        std::to_string(out.num_heads));
  if (const auto head_dim = top.optional_positive_int("head_dim")) {
    out.head_dim = *head_dim;
  } else {
    if (out.hidden_size % out.num_heads != 0)
      top.fail("hidden_size", std::to_string(out.hidden_size) +
                                  " is not divisible by num_attention_heads " +
                                  std::to_string(out.num_heads) + " (and head_dim is not given)");
    out.head_dim = out.hidden_size / out.num_heads;
  }
  if (out.head_dim % 2 != 0)
    top.fail("head_dim", std::to_string(out.head_dim) + " must be even (rotate-half RoPE)");

  out.rms_norm_eps = top.positive_number("rms_norm_eps", 1e-6);
  read_rope(top, source, out);

  // Biases: Qwen2Attention always builds q/k/v with bias=True; MistralAttention never has biases;
  // LlamaAttention follows attention_bias, which also puts a bias on o_proj (unsupported).
  switch (out.architecture) {
    case Architecture::qwen2:
      out.attention_bias = true;
      break;
    case Architecture::mistral:
      out.attention_bias = false;
      break;
    case Architecture::llama:
      if (top.boolean("attention_bias", false))
        top.fail("attention_bias",
                 "true is not supported for LlamaForCausalLM (it adds an o_proj "
                 "bias, which ModelWeights does not carry)");
      out.attention_bias = false;
      if (top.boolean("mlp_bias", false))
        top.fail("mlp_bias", "true is not supported (MLP biases are not implemented)");
      break;
  }
  out.tie_word_embeddings = top.boolean("tie_word_embeddings", false);

  // Special tokens.
  out.bos_token_id = top.optional_token_id("bos_token_id");
  out.eos_token_ids = top.token_id_list("eos_token_id");
  out.pad_token_id = top.optional_token_id("pad_token_id");
  const auto generation_path = model_dir / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(generation_path, ec)) {
    const json generation = read_json_file(generation_path);
    const FieldReader gen(generation, generation_path.string());
    if (gen.has("eos_token_id")) out.eos_token_ids = gen.token_id_list("eos_token_id");
  }
  for (const int id : out.eos_token_ids)
    if (id >= out.vocab_size)
      top.fail("eos_token_id", "token id " + std::to_string(id) + " is not below vocab_size " +
                                   std::to_string(out.vocab_size));

  // Dtype (transformers 4 writes torch_dtype, transformers 5 dtype).
  const std::string dtype_field = top.has("dtype") ? "dtype" : "torch_dtype";
  const auto dtype = top.string(dtype_field);
  if (dtype) {
    if (*dtype == "bfloat16")
      out.dtype = ComputeDtype::bf16;
    else if (*dtype == "float32" || *dtype == "float16")
      out.dtype = ComputeDtype::f32;
    else
      top.fail(dtype_field,
               "dtype '" + *dtype + "' is not supported (supported: bfloat16, float32, float16)");
  }

  // Sliding window (not implemented): fine when disabled or no smaller than the context.
  const json* window = top.find("sliding_window");
  const json mistral_default_window = 4096;  // MistralConfig.sliding_window when the key is absent
  if (out.architecture == Architecture::mistral && !config.contains("sliding_window"))
    window = &mistral_default_window;
  bool window_active = window != nullptr;
  if (out.architecture == Architecture::llama) window_active = false;  // LlamaAttention has none
  if (out.architecture == Architecture::qwen2) {
    // Qwen2Config: sliding_window applies only with use_sliding_window, to layers >=
    // max_window_layers.
    const bool use = top.boolean("use_sliding_window", false);
    // transformers 5 writes layer_types ("full_attention" / "sliding_attention" per layer); older
    // configs imply it from max_window_layers.
    bool any_sliding_layer = false;
    if (const json* layer_types = top.find("layer_types")) {
      if (!layer_types->is_array() ||
          layer_types->size() != static_cast<std::size_t>(out.num_layers))
        top.fail("layer_types", "expected a list of " + std::to_string(out.num_layers) +
                                    " layer types, found " + layer_types->dump());
      for (const auto& type : *layer_types) {
        if (type == "sliding_attention")
          any_sliding_layer = true;
        else if (type != "full_attention")
          top.fail("layer_types", "unknown layer type " + type.dump() +
                                      " (expected full_attention or sliding_attention)");
      }
    } else {
      const json* layers_field = top.find("max_window_layers");
      const auto max_window_layers =
          layers_field != nullptr ? top.integer("max_window_layers", *layers_field) : 28;
      any_sliding_layer = max_window_layers < out.num_layers;
    }
    window_active = window_active && use && any_sliding_layer;
  }
  if (window_active) {
    const auto size = top.integer("sliding_window", *window);
    if (size < out.max_position_embeddings)
      top.fail("sliding_window", "an active sliding window of " + std::to_string(size) +
                                     " tokens (< max_position_embeddings " +
                                     std::to_string(out.max_position_embeddings) +
                                     ") is not implemented");
  }
  return HfConfigFile{out, dtype.has_value()};
}

}  // namespace kvaudit::model

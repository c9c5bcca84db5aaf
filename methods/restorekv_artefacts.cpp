// The RestoreKV artefact readers (restorekv_artefacts.h).
#include "methods/restorekv_artefacts.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "methods/artefact_files.h"

namespace kvaudit::methods {
namespace {

using nlohmann::json;

// "<source>: <field>: what" for a field of adapter_config.json.
[[noreturn]] void refuse_field(const std::string& where, const std::string& field,
                               const std::string& what) {
  fail_artefact(where, field + ": " + what);
}

constexpr std::array<LoraTarget, 7> kTargets = {
    LoraTarget::q_proj,    LoraTarget::k_proj,  LoraTarget::v_proj,   LoraTarget::o_proj,
    LoraTarget::gate_proj, LoraTarget::up_proj, LoraTarget::down_proj};

constexpr const char* kTargetList = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";

constexpr const char* kEmbeddingsTensor = "restore_embeddings";
constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";
constexpr const char* kKeyPrefix = "base_model.model.model.layers.";

std::optional<LoraTarget> target_named(std::string_view name) {
  for (const LoraTarget t : kTargets)
    if (lora_target_name(t) == name) return t;
  return std::nullopt;
}

bool in_attention(LoraTarget t) {
  return t == LoraTarget::q_proj || t == LoraTarget::k_proj || t == LoraTarget::v_proj ||
         t == LoraTarget::o_proj;
}

// "<layer>.<self_attn|mlp>.<module>.lora_<A|B>.weight" for a key without the prefix.
std::string key_rest(LoraTarget t, bool b) {
  return std::string(in_attention(t) ? "self_attn." : "mlp.") + std::string(lora_target_name(t)) +
         (b ? ".lora_B.weight" : ".lora_A.weight");
}

std::string key_of(int layer, LoraTarget t, bool b) {
  return kKeyPrefix + std::to_string(layer) + "." + key_rest(t, b);
}

struct KeyParts {
  int layer = 0;
  LoraTarget target = LoraTarget::q_proj;
  bool b = false;  // lora_B (else lora_A)
};

// The parts of an adapter key (canonical decimal layer index); nullopt for any other name.
std::optional<KeyParts> parse_adapter_key(const std::string& name) {
  const std::string prefix = kKeyPrefix;
  if (!name.starts_with(prefix)) return std::nullopt;
  const std::size_t start = prefix.size();
  const std::size_t dot = name.find('.', start);
  if (dot == std::string::npos || dot == start || dot - start > 6) return std::nullopt;
  int layer = 0;
  for (std::size_t i = start; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    layer = layer * 10 + (name[i] - '0');
  }
  if (dot - start > 1 && name[start] == '0') return std::nullopt;
  const std::string_view rest = std::string_view(name).substr(dot + 1);
  for (const LoraTarget t : kTargets)
    for (const bool b : {false, true})
      if (rest == key_rest(t, b)) return KeyParts{layer, t, b};
  return std::nullopt;
}

// A JSON value for messages, cut short.
std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// nlohmann parse with a duplicate-key check in every object (nlohmann keeps the last silently).
json parse_strict_json(std::string_view text, const std::string& where) {
  std::vector<std::set<std::string>> seen_keys;  // one per open object or array
  std::string duplicate;
  const json::parser_callback_t watch = [&](int /*depth*/, json::parse_event_t event,
                                            json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        seen_keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!seen_keys.empty()) seen_keys.pop_back();
        break;
      case json::parse_event_t::key: {
        const auto key = parsed.get<std::string>();
        if (!seen_keys.empty() && !seen_keys.back().insert(key).second && duplicate.empty())
          duplicate = key;
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), watch, /*allow_exceptions=*/true,
                       /*ignore_comments=*/false);
  } catch (const json::exception& e) {
    fail_artefact(where, std::string("not valid JSON: ") + e.what());
  }
  if (!duplicate.empty())
    fail_artefact(where, duplicate + ": appears twice (JSON keys must be unique)");
  return root;
}

// null, or an empty list, object or string.
bool unset(const json& value) {
  if (value.is_string()) return value.get_ref<const std::string&>().empty();
  return value.is_null() || ((value.is_array() || value.is_object()) && value.empty());
}

struct AdapterConfig {
  int rank = 0;
  double scaling = 0.0;
  std::set<LoraTarget> targets;
};

AdapterConfig config_of(std::string_view text, const std::string& source) {
  const std::string where = source + ": " + kConfigFile;
  const json root = parse_strict_json(text, where);
  if (!root.is_object()) fail_artefact(where, "not a JSON object");
  const auto field = [&](const char* name) -> const json* {
    const auto it = root.find(name);
    return it == root.end() ? nullptr : &*it;
  };
  const auto required = [&](const char* name) -> const json& {
    const json* value = field(name);
    if (value == nullptr) refuse_field(where, name, "missing");
    return *value;
  };
  // A boolean that must not be true; absent = false (peft's default).
  const auto flag = [&](const char* name, const std::string& feature) {
    const json* value = field(name);
    if (value == nullptr) return;
    if (!value->is_boolean())
      refuse_field(where, name, "must be true or false, not " + shown(*value));
    if (value->get<bool>())
      refuse_field(where, name, "is true (" + feature + "); kvaudit does not support it");
  };

  const json& peft_type = required("peft_type");
  if (!peft_type.is_string() || peft_type.get<std::string>() != "LORA")
    refuse_field(where, "peft_type",
                 "is " + shown(peft_type) + "; a RestoreKV adapter is a LoRA (\"LORA\")");

  AdapterConfig config;
  const json& r = required("r");
  if (!r.is_number_unsigned() || r.get<std::uint64_t>() < 1 ||
      r.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    refuse_field(where, "r", "must be an integer >= 1, not " + shown(r));
  config.rank = static_cast<int>(r.get<std::uint64_t>());

  const json& alpha = required("lora_alpha");
  if (!alpha.is_number() || !std::isfinite(alpha.get<double>()))
    refuse_field(where, "lora_alpha", "must be a number, not " + shown(alpha));
  bool rslora = false;
  if (const json* value = field("use_rslora"); value != nullptr) {
    if (!value->is_boolean())
      refuse_field(where, "use_rslora", "must be true or false, not " + shown(*value));
    rslora = value->get<bool>();
  }
  // peft LoraLayer.update_layer, in Python double.
  config.scaling = rslora ? alpha.get<double>() / std::sqrt(static_cast<double>(config.rank))
                          : alpha.get<double>() / static_cast<double>(config.rank);

  const json& targets = required("target_modules");
  if (targets.is_string())
    refuse_field(where, "target_modules",
                 "is the string " + shown(targets) +
                     "; kvaudit reads only a list of module names (\"all-linear\" and regular "
                     "expressions are not supported)");
  if (!targets.is_array()) refuse_field(where, "target_modules", "must be a list of module names");
  if (targets.empty()) refuse_field(where, "target_modules", "is empty");
  for (const json& name : targets) {
    const std::optional<LoraTarget> t =
        name.is_string() ? target_named(name.get<std::string>()) : std::nullopt;
    if (!t) refuse_field(where, "target_modules", shown(name) + " is not one of " + kTargetList);
    config.targets.insert(*t);
  }

  flag("fan_in_fan_out", "transposed Conv1D weights");
  if (const json* bias = field("bias");
      bias != nullptr && !(bias->is_string() && bias->get<std::string>() == "none"))
    refuse_field(where, "bias",
                 "is " + shown(*bias) + "; only \"none\" is supported (no trained biases)");
  flag("lora_bias", "a trained bias on lora_B");
  flag("use_dora", "DoRA, weight-decomposed LoRA");
  flag("use_qalora", "QA-LoRA");
  for (const char* name : {"rank_pattern", "alpha_pattern"}) {
    const json* value = field(name);
    if (value != nullptr && !value->is_null() && !(value->is_object() && value->empty()))
      refuse_field(
          where, name,
          "is " + shown(*value) + "; per-module ranks or alphas are not supported (must be empty)");
  }
  const std::pair<const char*, const char*> must_be_unset[] = {
      {"modules_to_save", "it trains and saves whole modules"},
      {"trainable_token_indices", "it trains embedding rows"},
      {"target_parameters", "it puts LoRA on parameters, not Linear modules"},
      {"layer_replication", "it replicates layers"},
      {"layers_to_transform", "it restricts the layers the adapter wraps"},
      {"layers_pattern", "it restricts the layers the adapter wraps"},
      {"exclude_modules", "it excludes modules from target_modules"},
      {"alora_invocation_tokens", "activated LoRA, gated on tokens"}};
  for (const auto& [name, why] : must_be_unset)
    if (const json* value = field(name); value != nullptr && !unset(*value))
      refuse_field(where, name, "is " + shown(*value) + "; must be null or empty (" + why + ")");
  if (const json* value = field("use_bdlora");
      value != nullptr && !value->is_null() && !(value->is_boolean() && !value->get<bool>()))
    refuse_field(where, "use_bdlora",
                 "is " + shown(*value) + "; must be null (block-diagonal LoRA)");
  for (const auto& [name, feature] :
       {std::pair{"arrow_config", "Arrow routing"}, std::pair{"kasa_config", "KaSA"}})
    if (const json* value = field(name); value != nullptr && !value->is_null())
      refuse_field(where, name,
                   std::string("is ") + shown(*value) + "; must be null (" + feature + ")");
  return config;
}

int width_of(const std::string& source, const std::string& name, const ArtefactTensor& t, int rank,
             bool b) {
  const std::size_t rank_axis = b ? 1 : 0;
  const std::size_t width_axis = b ? 0 : 1;
  if (t.shape.size() != 2 || t.shape[rank_axis] != rank || t.shape[width_axis] < 1 ||
      t.shape[width_axis] > std::numeric_limits<int>::max())
    fail_artefact(source, "tensor '" + name + "' has shape " + shape_text(t.shape) + ", expected " +
                              (b ? "[out_features, " + std::to_string(rank) + "] (lora_B, r = "
                                 : "[" + std::to_string(rank) + ", in_features] (lora_A, r = ") +
                              std::to_string(rank) + " from adapter_config.json)");
  return static_cast<int>(t.shape[width_axis]);
}

// The widths of the adapter's modules that are one and the same model quantity must agree.
void check_widths_agree(const std::string& source, const std::map<LoraTarget, LoraModule>& layer) {
  struct Side {
    LoraTarget target;
    bool in;
  };
  const std::pair<const char*, std::vector<Side>> groups[] = {
      {"hidden size",
       {{LoraTarget::q_proj, true},
        {LoraTarget::k_proj, true},
        {LoraTarget::v_proj, true},
        {LoraTarget::gate_proj, true},
        {LoraTarget::up_proj, true},
        {LoraTarget::o_proj, false},
        {LoraTarget::down_proj, false}}},
      {"query width (heads x head_dim)", {{LoraTarget::q_proj, false}, {LoraTarget::o_proj, true}}},
      {"KV width (KV heads x head_dim)",
       {{LoraTarget::k_proj, false}, {LoraTarget::v_proj, false}}},
      {"intermediate size",
       {{LoraTarget::gate_proj, false},
        {LoraTarget::up_proj, false},
        {LoraTarget::down_proj, true}}}};
  const auto text = [](const Side& s, int width) {
    return std::string(lora_target_name(s.target)) + (s.in ? " in_features " : " out_features ") +
           std::to_string(width);
  };
  for (const auto& [quantity, sides] : groups) {
    std::optional<std::pair<Side, int>> first;
    for (const Side& s : sides) {
      const auto it = layer.find(s.target);
      if (it == layer.end()) continue;
      const int width = s.in ? it->second.in_features : it->second.out_features;
      if (!first) {
        first = std::pair{s, width};
      } else if (width != first->second) {
        fail_artefact(source, text(first->first, first->second) + " and " + text(s, width) +
                                  " differ; both are the model's " + quantity);
      }
    }
  }
}

}  // namespace

std::string_view lora_target_name(LoraTarget target) {
  switch (target) {
    case LoraTarget::q_proj:
      return "q_proj";
    case LoraTarget::k_proj:
      return "k_proj";
    case LoraTarget::v_proj:
      return "v_proj";
    case LoraTarget::o_proj:
      return "o_proj";
    case LoraTarget::gate_proj:
      return "gate_proj";
    case LoraTarget::up_proj:
      return "up_proj";
    case LoraTarget::down_proj:
      return "down_proj";
  }
  return "?";
}

LoraAdapter parse_lora_adapter(std::string_view config_json,
                               std::vector<unsigned char> safetensors_bytes,
                               const std::string& source) {
  const AdapterConfig config = config_of(config_json, source);
  const std::string where = source + ": " + kWeightsFile;
  const std::vector<std::string> names = parse_safetensors_names(safetensors_bytes, where);
  if (names.empty()) fail_artefact(where, "holds no LoRA weights");

  // Which (layer, module) has its A and its B.
  std::map<std::pair<int, LoraTarget>, std::array<bool, 2>> present;
  std::set<int> layers;
  for (const std::string& name : names) {
    const std::optional<KeyParts> key = parse_adapter_key(name);
    if (!key)
      fail_artefact(where, "tensor '" + name + "': not a LoRA weight kvaudit reads (only " +
                               kKeyPrefix + "<i>.self_attn.<q|k|v|o>_proj.lora_<A|B>.weight and " +
                               kKeyPrefix + "<i>.mlp.<gate|up|down>_proj.lora_<A|B>.weight)");
    if (!config.targets.contains(key->target))
      fail_artefact(where, "tensor '" + name + "': " + std::string(lora_target_name(key->target)) +
                               " is not in adapter_config.json's target_modules");
    present[{key->layer, key->target}][key->b ? 1 : 0] = true;
    layers.insert(key->layer);
  }
  for (const auto& [at, sides] : present)
    for (const bool b : {false, true})
      if (!sides[b ? 1 : 0])
        fail_artefact(where, "tensor '" + key_of(at.first, at.second, b) + "' is missing (every " +
                                 (b ? "lora_A needs its lora_B" : "lora_B needs its lora_A") + ")");
  const int n_layers = *layers.rbegin() + 1;
  if (static_cast<int>(layers.size()) != n_layers)
    fail_artefact(where, "the LoRA layers are not numbered 0.." + std::to_string(n_layers - 1));
  for (int layer = 0; layer < n_layers; ++layer)
    for (const LoraTarget t : config.targets)
      if (!present.contains({layer, t}))
        fail_artefact(where,
                      "layer " + std::to_string(layer) + " has no " +
                          std::string(lora_target_name(t)) +
                          " weights, though target_modules lists it (peft would keep its initial "
                          "weights there)");

  std::map<std::string, ArtefactTensor> tensors =
      parse_safetensors_tensors(std::move(safetensors_bytes), where, names);
  LoraAdapter adapter;
  adapter.rank = config.rank;
  adapter.scaling = config.scaling;
  adapter.layers.resize(static_cast<std::size_t>(n_layers));
  for (int layer = 0; layer < n_layers; ++layer) {
    for (const LoraTarget t : config.targets) {
      const std::string a_name = key_of(layer, t, false);
      const std::string b_name = key_of(layer, t, true);
      ArtefactTensor& a = tensors.at(a_name);
      ArtefactTensor& b = tensors.at(b_name);
      LoraModule module;
      module.in_features = width_of(where, a_name, a, config.rank, false);
      module.out_features = width_of(where, b_name, b, config.rank, true);
      if (layer > 0) {
        const LoraModule& first = adapter.layers.front().at(t);
        if (module.in_features != first.in_features || module.out_features != first.out_features)
          fail_artefact(where, "tensor '" + a_name + "': " + std::string(lora_target_name(t)) +
                                   " maps " + std::to_string(module.in_features) + " -> " +
                                   std::to_string(module.out_features) + " in layer " +
                                   std::to_string(layer) + " but " +
                                   std::to_string(first.in_features) + " -> " +
                                   std::to_string(first.out_features) + " in layer 0");
      }
      module.a = std::move(a.values);
      module.b = std::move(b.values);
      adapter.layers[static_cast<std::size_t>(layer)].emplace(t, std::move(module));
    }
  }
  check_widths_agree(where, adapter.layers.front());
  return adapter;
}

std::vector<float> parse_restore_embeddings(std::vector<unsigned char> bytes,
                                            const std::string& source, int* tokens, int* hidden) {
  const std::vector<std::string> names = parse_safetensors_names(bytes, source);
  if (names.size() != 1 || names.front() != kEmbeddingsTensor) {
    std::string held;
    for (const std::string& n : names) held += (held.empty() ? "'" : ", '") + n + "'";
    fail_artefact(source, "holds " +
                              (held.empty() ? std::string("no tensors") : "the tensors " + held) +
                              "; a RestoreKV embeddings file holds exactly one tensor, '" +
                              kEmbeddingsTensor + "' [restore tokens, hidden size]");
  }
  std::map<std::string, ArtefactTensor> tensors =
      parse_safetensors_tensors(std::move(bytes), source, {kEmbeddingsTensor});
  ArtefactTensor& t = tensors.at(kEmbeddingsTensor);
  constexpr auto kIntMax = static_cast<std::int64_t>(std::numeric_limits<int>::max());
  if (t.shape.size() != 2 || t.shape[0] < 1 || t.shape[1] < 1 || t.shape[0] > kIntMax ||
      t.shape[1] > kIntMax)
    fail_artefact(source, std::string("tensor '") + kEmbeddingsTensor + "' has shape " +
                              shape_text(t.shape) +
                              ", expected [restore tokens >= 1, hidden size >= 1]");
  if (tokens != nullptr) *tokens = static_cast<int>(t.shape[0]);
  if (hidden != nullptr) *hidden = static_cast<int>(t.shape[1]);
  return std::move(t.values);
}

namespace {

LoraAdapter read_adapter_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(dir, error))
    fail_artefact(
        dir, std::string("not a directory (the adapter parameter names the directory holding ") +
                 kConfigFile + " and " + kWeightsFile + ")");
  const fs::path root(dir);
  if (!fs::is_regular_file(root / kWeightsFile, error)) {
    if (fs::exists(root / "adapter_model.bin", error))
      fail_artefact(
          dir, std::string(kWeightsFile) +
                   ": missing; the directory holds only adapter_model.bin (a pickled adapter) and "
                   "kvaudit reads safetensors (save the adapter with safe_serialization=True)");
    fail_artefact(dir, std::string(kWeightsFile) + ": missing");
  }
  if (!fs::is_regular_file(root / kConfigFile, error))
    fail_artefact(dir, std::string(kConfigFile) + ": missing");
  const auto bytes_of = [&](const char* file) {
    try {
      return read_artefact_bytes((root / file).string());
    } catch (const std::invalid_argument&) {
      fail_artefact(dir, std::string(file) + ": cannot be read");
    }
  };
  const std::vector<unsigned char> config = bytes_of(kConfigFile);
  return parse_lora_adapter(
      std::string_view(reinterpret_cast<const char*>(config.data()), config.size()),
      bytes_of(kWeightsFile), dir);
}

}  // namespace

RestoreArtefacts read_restorekv_artefacts(const std::string& embeddings_file,
                                          const std::string& adapter_dir) {
  RestoreArtefacts out;
  out.embeddings = parse_restore_embeddings(read_artefact_bytes(embeddings_file), embeddings_file,
                                            &out.tokens, &out.hidden_size);
  out.adapter = read_adapter_dir(adapter_dir);
  return out;
}

void check_restorekv_fits(const RestoreArtefacts& artefacts, const RestoreModelShape& model) {
  const auto refuse = [](const std::string& what) { throw std::invalid_argument(what); };
  if (artefacts.hidden_size != model.hidden_size)
    refuse("restore_embeddings: hidden size " + std::to_string(artefacts.hidden_size) +
           " differs from the model's " + std::to_string(model.hidden_size));
  const LoraAdapter& adapter = artefacts.adapter;
  if (static_cast<int>(adapter.layers.size()) != model.num_layers)
    refuse("adapter: LoRA weights for " + std::to_string(adapter.layers.size()) +
           " layers, the model has " + std::to_string(model.num_layers));
  const auto expected = [&](LoraTarget t) -> std::pair<int, int> {  // (in, out)
    switch (t) {
      case LoraTarget::q_proj:
        return {model.hidden_size, model.q_width};
      case LoraTarget::k_proj:
      case LoraTarget::v_proj:
        return {model.hidden_size, model.kv_width};
      case LoraTarget::o_proj:
        return {model.q_width, model.hidden_size};
      case LoraTarget::gate_proj:
      case LoraTarget::up_proj:
        return {model.hidden_size, model.intermediate_size};
      case LoraTarget::down_proj:
        return {model.intermediate_size, model.hidden_size};
    }
    return {0, 0};
  };
  for (std::size_t layer = 0; layer < adapter.layers.size(); ++layer)
    for (const auto& [t, module] : adapter.layers[layer]) {
      const auto [in, out] = expected(t);
      if (module.in_features != in || module.out_features != out)
        refuse("adapter: layer " + std::to_string(layer) + " " + std::string(lora_target_name(t)) +
               " maps " + std::to_string(module.in_features) + " -> " +
               std::to_string(module.out_features) + ", the model's " +
               std::string(lora_target_name(t)) + " maps " + std::to_string(in) + " -> " +
               std::to_string(out));
    }
}

void check_restore_embeddings_file(const std::string& path) {
  check_without_path_prefix(path, [&] {
    (void)parse_restore_embeddings(read_artefact_bytes(path), path, nullptr, nullptr);
  });
}

void check_restorekv_adapter_dir(const std::string& path) {
  check_without_path_prefix(path, [&] { (void)read_adapter_dir(path); });
}

}  // namespace kvaudit::methods

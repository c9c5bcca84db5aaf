// Test helper: the method of a kvpress golden case ({"id", "variant", "params", "scorer"} as the
// kvpress golden scripts write the catalogue configuration; tools/golden/make_kvpress_golden.py,
// tools/golden/kvpress_groups/).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "methods/catalog.h"
#include "methods/extra_pass.h"
#include "methods/method_factory.h"
#include "methods/param_lists.h"
#include "runners/model/formats/load_weights.h"

namespace kvaudit::methods::testing {

inline std::unique_ptr<Method> method_of_golden(const nlohmann::json& m) {
  MethodConfig c{m.at("id").get<std::string>(),
                 m.at("id").get<std::string>(),
                 m.at("variant").is_null() ? "" : m.at("variant").get<std::string>(),
                 {}};
  for (const auto& [k, v] : m.at("params").items()) {
    if (v.is_number_integer()) {
      c.params[k] = v.get<std::int64_t>();
    } else if (v.is_number_float()) {
      c.params[k] = v.get<double>();
    } else {
      c.params[k] = v.get<std::string>();
    }
  }
  return make_method(c);
}

// A golden parameter value as the catalogue's ParamValue (lists: their canonical string form).
inline ParamValue golden_param(const nlohmann::json& v, const std::string& where) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  // List parameters (per_layer_compression's and composed's compression_ratios): the canonical
  // string form a manifest's TOML array is kept in (methods/param_lists.h).
  if (v.is_array() &&
      std::all_of(v.begin(), v.end(), [](const nlohmann::json& x) { return x.is_number(); }))
    return format_real_list(v.get<std::vector<double>>());
  throw std::runtime_error(where + ": unsupported parameter value " + v.dump());
}

// The golden's nested method object → configs; a nested scorer ("scorer") and composed's presses
// ("stages") are registered in `named`. File parameters (ParamType::path: learned artefacts) are
// written relative to the source tree `source_dir`.
inline MethodConfig golden_config(const nlohmann::json& m,
                                  std::map<std::string, MethodConfig>& named,
                                  const std::string& name,
                                  const std::filesystem::path& source_dir) {
  MethodConfig c{name,
                 m.at("id").get<std::string>(),
                 m.at("variant").is_null() ? "" : m.at("variant").get<std::string>(),
                 {}};
  for (const auto& [k, v] : m.at("params").items()) c.params[k] = golden_param(v, name + "." + k);
  if (const MethodSpec* spec = find_method(c.id)) {
    for (const ParamSpec& p : spec->params) {
      const auto it = c.params.find(p.name);
      if (p.type == ParamType::path && it != c.params.end())
        it->second = (source_dir / std::get<std::string>(it->second)).string();
    }
  }
  if (!m.at("scorer").is_null()) {
    const std::string inner = name + ".scorer";
    named[inner] = golden_config(m.at("scorer"), named, inner, source_dir);
    c.params["scorer"] = inner;
  }
  if (m.contains("stages")) {
    std::vector<std::string> names;
    for (const auto& stage : m.at("stages")) {
      // (config names cannot hold the label's commas: the list is joined by them)
      names.push_back("stage" + std::to_string(names.size()));
      named[names.back()] = golden_config(stage, named, names.back(), source_dir);
    }
    c.params["presses"] = format_name_list(names);
  }
  return c;
}

// The method of a golden method object, wrappers' scorers and stages included.
inline std::unique_ptr<Method> method_of_golden_config(const nlohmann::json& m,
                                                       const std::filesystem::path& source_dir) {
  std::map<std::string, MethodConfig> named;
  const MethodConfig config = golden_config(m, named, "golden", source_dir);
  return make_method(config, [&](const std::string& n) -> const MethodConfig* {
    const auto it = named.find(n);
    return it == named.end() ? nullptr : &it->second;
  });
}

// Methods with an extra forward pass (KVzip, KVgrad): the reconstruction prompt's ids kvpress used,
// which the golden module recorded as the note "kvzip pass_prompt: {json}" (tools/golden/
// kvpress_groups/kvzip.py: the tiny models have no tokenizer, so kvpress ran with a stand-in);
// empty when the document has none.
inline PassPrompt recorded_pass_prompt(const nlohmann::json& golden) {
  const std::string prefix = "kvzip pass_prompt: ";
  for (const auto& note : golden.at("notes")) {
    const std::string text = note.get<std::string>();
    if (!text.starts_with(prefix)) continue;
    const nlohmann::json ids = nlohmann::json::parse(text.substr(prefix.size()));
    return {ids.at("prefix_length").get<int>(), ids.at("suffix").get<std::vector<std::int32_t>>(),
            ids.at("repeat_first").get<std::vector<std::int32_t>>(),
            ids.at("repeat_next").get<std::vector<std::int32_t>>()};
  }
  return {};
}

// golden["prompts"]: id -> token ids.
inline std::map<std::string, std::vector<std::int32_t>> golden_prompts(
    const nlohmann::json& golden) {
  std::map<std::string, std::vector<std::int32_t>> prompts;
  for (const auto& p : golden.at("prompts"))
    prompts[p.at("id").get<std::string>()] = p.at("ids").get<std::vector<std::int32_t>>();
  return prompts;
}

// The weights of a case's "<model>/<dtype>" directory under `models`, loaded at the first use.
class GoldenModels {
 public:
  explicit GoldenModels(std::filesystem::path models) : models_(std::move(models)) {}
  static std::string directory(const nlohmann::json& c) {
    return c.at("model").get<std::string>() + "/" + c.at("dtype").get<std::string>();
  }
  const model::ModelWeights& weights(const nlohmann::json& c) {
    auto& w = loaded_[directory(c)];
    if (!w)
      w = std::make_unique<model::ModelWeights>(model::load_model_weights(models_ / directory(c)));
    return *w;
  }

 private:
  std::filesystem::path models_;
  std::map<std::string, std::unique_ptr<model::ModelWeights>> loaded_;
};

}  // namespace kvaudit::methods::testing

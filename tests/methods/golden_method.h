// Test helper: the method of a decoding golden case ({"id", "variant", "params"} as the kvpress
// golden scripts write the catalogue configuration; tools/golden/kvpress_groups/decoding.py,
// cam.py).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "methods/extra_pass.h"
#include "methods/method_factory.h"
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

// GoldenReference: one HF-parity fixture written by tools/golden/make_model_golden.py or
// make_smollm2_golden.py: `reference.json` (prompts, greedy continuations, HF's own measurements,
// versions) and `reference.safetensors` (F32 tensors such as logits and per-layer keys/values).
// The safetensors file is read with the project's own reader (runners/model/formats/safetensors.h);
// every lookup checks the tensor's dtype and shape and fails naming the file and the tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runners/model/formats/safetensors.h"

namespace kvaudit::parity_test {

class GoldenReference {
 public:
  // Reads `<directory>/reference.json` and maps `<directory>/reference.safetensors`. Throws
  // std::runtime_error (JSON) or model::ModelInputError (safetensors) naming the file.
  explicit GoldenReference(const std::filesystem::path& directory);

  const std::filesystem::path& directory() const { return directory_; }
  const nlohmann::json& manifest() const { return manifest_; }

  bool contains(const std::string& tensor_name) const;
  // The F32 tensor `tensor_name`, which must have exactly `expected_shape`.
  std::vector<float> tensor(const std::string& tensor_name,
                            const std::vector<std::int64_t>& expected_shape) const;

 private:
  std::filesystem::path directory_;
  nlohmann::json manifest_;
  model::SafetensorsFile tensors_;
};

// Token ids stored as a JSON array of integers, as the CPU backend takes them.
std::vector<std::int32_t> token_ids(const nlohmann::json& array);

}  // namespace kvaudit::parity_test

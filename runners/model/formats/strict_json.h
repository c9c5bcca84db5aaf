// Strict JSON parsing for model files (safetensors headers, model.safetensors.index.json,
// config.json): nlohmann parses the text, a parser callback rejects duplicate keys in any object
// (nlohmann would silently keep the last one), and every error becomes a ModelInputError naming the
// file and the JSON path of the duplicate or the parse position.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kvaudit::model {

// `source` names the file in messages (e.g. "model.safetensors: header").
nlohmann::json parse_json_strict(std::string_view text, const std::string& source);

// A JSON value's type for messages: "string", "number", "array", "object", "boolean", "null".
std::string json_type_name(const nlohmann::json& value);

}  // namespace kvaudit::model

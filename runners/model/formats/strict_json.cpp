// parse_json_strict: nlohmann parse with a duplicate-key check (parser callback) and file-named
// errors.
#include "runners/model/formats/strict_json.h"

#include <set>
#include <vector>

#include "runners/model/model_error.h"

namespace kvaudit::model {

nlohmann::json parse_json_strict(std::string_view text, const std::string& source) {
  // One set of seen keys per open object; the path of keys leading to the current object.
  std::vector<std::set<std::string>> seen_keys;
  std::vector<std::string> path;
  std::string last_key;
  std::string duplicate;
  auto callback = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                      nlohmann::json& parsed) -> bool {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start:
        seen_keys.emplace_back();
        path.push_back(last_key);
        break;
      case Event::object_end:
        if (!seen_keys.empty()) seen_keys.pop_back();
        if (!path.empty()) path.pop_back();
        break;
      case Event::key: {
        last_key = parsed.get<std::string>();
        if (!seen_keys.empty() && !seen_keys.back().insert(last_key).second && duplicate.empty()) {
          std::string where;
          for (std::size_t i = 1; i < path.size(); ++i) where += path[i] + ".";
          duplicate = where + last_key;
        }
        break;
      }
      case Event::array_start:
        path.push_back(last_key);
        seen_keys.emplace_back();  // arrays have no keys; keeps the stacks balanced
        break;
      case Event::array_end:
        if (!seen_keys.empty()) seen_keys.pop_back();
        if (!path.empty()) path.pop_back();
        break;
      case Event::value:
        break;
    }
    return true;
  };
  nlohmann::json result;
  try {
    result = nlohmann::json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                                   /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw ModelInputError(source + ": invalid JSON: " + e.what());
  }
  if (!duplicate.empty())
    throw ModelInputError(source + ": duplicate key '" + duplicate +
                          "' (JSON keys must be unique)");
  return result;
}

std::string json_type_name(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

}  // namespace kvaudit::model

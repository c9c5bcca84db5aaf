// Test helper: the method of a decoding golden case ({"id", "variant", "params"} as the kvpress
// golden scripts write the catalogue configuration; tools/golden/kvpress_groups/decoding.py,
// cam.py).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "methods/method_factory.h"

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

}  // namespace kvaudit::methods::testing

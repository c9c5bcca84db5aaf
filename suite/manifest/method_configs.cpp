// The manifest's method configurations for the methods layer; see method_configs.h.
#include "suite/manifest/method_configs.h"

#include <algorithm>

namespace kvaudit::manifest {

methods::MethodConfig to_method_config(const MethodConfig& config) {
  return {
      .name = config.name, .id = config.method, .variant = config.variant, .params = config.params};
}

methods::ConfigResolver config_resolver(const std::vector<methods::MethodConfig>& configs) {
  return [&configs](const std::string& name) -> const methods::MethodConfig* {
    const auto it = std::find_if(configs.begin(), configs.end(),
                                 [&](const methods::MethodConfig& c) { return c.name == name; });
    return it == configs.end() ? nullptr : &*it;
  };
}

std::vector<methods::MethodConfig> method_configs(const Manifest& manifest) {
  std::vector<methods::MethodConfig> configs;
  configs.reserve(manifest.methods.size());
  for (const MethodConfig& c : manifest.methods) configs.push_back(to_method_config(c));
  return configs;
}

}  // namespace kvaudit::manifest

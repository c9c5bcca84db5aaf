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
  // File parameters are handed to the factory resolved against the manifest's directory, so a
  // method opens the file the plan checked and fingerprinted.
  for (const MethodFileParameter& f : method_file_parameters(manifest)) {
    const auto index = static_cast<std::size_t>(f.config - manifest.methods.data());
    configs[index].params[f.param->name] = f.file.string();
  }
  return configs;
}

std::vector<MethodFileParameter> method_file_parameters(const Manifest& manifest) {
  std::vector<MethodFileParameter> out;
  for (const MethodConfig& c : manifest.methods) {
    const methods::MethodSpec* spec = methods::find_method(c.method);
    if (spec == nullptr) continue;
    for (const methods::ParamSpec& p : spec->params) {
      const auto it = c.params.find(p.name);
      if (p.type != methods::ParamType::path || it == c.params.end()) continue;
      const auto* written = std::get_if<std::string>(&it->second);
      if (written == nullptr || written->empty()) continue;
      out.push_back({&c, &p, resolved_file_parameter(manifest, *written)});
    }
  }
  return out;
}

std::filesystem::path resolved_file_parameter(const Manifest& manifest,
                                              const std::string& written) {
  return std::filesystem::absolute(manifest.resolve(written)).lexically_normal();
}

}  // namespace kvaudit::manifest

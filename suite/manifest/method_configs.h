// The manifest's method configurations in the methods layer's shape (methods/method_resolution.h),
// so the plan-time checks and the executor resolve them with the catalogue's one description of
// every parameter instead of reading parameters by name.
#pragma once

#include "methods/method_resolution.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

methods::MethodConfig to_method_config(const MethodConfig& config);

// Maps a configuration name to its methods::MethodConfig (nullptr for an unknown name); the
// returned resolver refers to `configs`, which must outlive it.
methods::ConfigResolver config_resolver(const std::vector<methods::MethodConfig>& configs);

// Every method configuration of `manifest`, in its order, with file parameters
// (methods::ParamType::path) resolved to absolute paths (resolved_file_parameter).
std::vector<methods::MethodConfig> method_configs(const Manifest& manifest);

// A file parameter as written in the manifest, resolved against the manifest's directory,
// absolute and lexically normal (what the method opens, the plan checks and the lock fingerprints).
std::filesystem::path resolved_file_parameter(const Manifest& manifest, const std::string& written);

// One file a method configuration names (a methods::ParamType::path parameter with a value; ""
// is a variant's "no file" default, e.g. duo_attention on_the_fly, and is not listed).
struct MethodFileParameter {
  const MethodConfig* config;       // in the manifest
  const methods::ParamSpec* param;  // in the catalogue
  std::filesystem::path file;       // resolved_file_parameter of the written value
};

// Every file parameter of `manifest`'s method configurations, in configuration then catalogue
// order: what the plan checks (path_check.h), the lock fingerprints (input_fingerprints.h) and
// method_configs hands to the factory.
std::vector<MethodFileParameter> method_file_parameters(const Manifest& manifest);

}  // namespace kvaudit::manifest

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

// Every method configuration of `manifest`, in its order.
std::vector<methods::MethodConfig> method_configs(const Manifest& manifest);

}  // namespace kvaudit::manifest

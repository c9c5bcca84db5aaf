// Plan-time check of observation windows against the benchmarks a grid runs them on; see
// method_windows.h. The windows come from resolving each configuration with the catalogue
// (methods::observation_window: the config's own typed `window` and its scorer's, defaults
// included), never from reading parameters by name.
#include "suite/manifest/method_windows.h"

#include <optional>
#include <set>
#include <string>

#include "methods/method_resolution.h"
#include "suite/manifest/method_configs.h"

namespace kvaudit::manifest {
namespace {

const MethodConfig* find_config(const Manifest& m, const std::string& name) {
  for (const auto& cfg : m.methods) {
    if (cfg.name == name) return &cfg;
  }
  return nullptr;
}

const Benchmark* find_benchmark(const Manifest& m, const std::string& name) {
  for (const auto& b : m.benchmarks) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace

void check_method_windows(const Manifest& m, Diagnostics& diag) {
  const std::vector<methods::MethodConfig> configs = method_configs(m);
  const methods::ConfigResolver resolve = config_resolver(configs);
  std::set<std::string> unbuildable;  // configurations reported once, not once per grid
  for (const auto& grid : m.grids) {
    for (const auto& method_name : grid.methods) {
      const MethodConfig* cfg = find_config(m, method_name);
      if (cfg == nullptr) continue;
      std::optional<methods::ObservationWindow> window;
      try {
        window = methods::observation_window(methods::resolve_method(*resolve(cfg->name), resolve));
      } catch (const std::invalid_argument& e) {
        // Called only when the parser found nothing wrong: a configuration it let through that
        // the run could not build is reported here, so that plan and run agree on what runs.
        if (unbuildable.insert(cfg->name).second)
          diag.error(cfg->pos, "methods." + cfg->name, e.what());
        continue;
      }
      if (!window) continue;
      for (const auto& benchmark_name : grid.benchmarks) {
        const Benchmark* b = find_benchmark(m, benchmark_name);
        if (b == nullptr || b->length <= 0 || window->size < b->length) continue;
        const std::string via =
            window->owner == cfg->name ? "" : " (its scorer methods." + window->owner + ")";
        diag.error(cfg->pos, "methods." + cfg->name + ".window",
                   "observation window " + std::to_string(window->size) + via +
                       " is not smaller than the context of benchmark '" + b->name + "' (length " +
                       std::to_string(b->length) + " tokens) in grid '" + grid.name +
                       "': no token would be left to evict");
      }
    }
  }
}

}  // namespace kvaudit::manifest

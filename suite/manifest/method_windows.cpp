#include "suite/manifest/method_windows.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace kvaudit::manifest {
namespace {

const MethodConfig* find_config(const Manifest& m, const std::string& name) {
  for (const auto& cfg : m.methods) {
    if (cfg.name == name) return &cfg;
  }
  return nullptr;
}

struct Window {
  std::int64_t size = 0;
  std::string owner;  // the config whose `window` it is
};

// The largest window a config uses, following `scorer` references (wrappers) a bounded depth.
std::optional<Window> window_of(const Manifest& m, const MethodConfig& cfg, int depth = 0) {
  std::optional<Window> window;
  if (auto it = cfg.params.find("window"); it != cfg.params.end()) {
    if (const auto* w = std::get_if<std::int64_t>(&it->second)) window = Window{*w, cfg.name};
  }
  if (depth < 8) {
    if (auto it = cfg.params.find("scorer"); it != cfg.params.end()) {
      if (const auto* name = std::get_if<std::string>(&it->second)) {
        if (const MethodConfig* inner = find_config(m, *name)) {
          auto w = window_of(m, *inner, depth + 1);
          if (w && (!window || w->size > window->size)) window = w;
        }
      }
    }
  }
  return window;
}

const Benchmark* find_benchmark(const Manifest& m, const std::string& name) {
  for (const auto& b : m.benchmarks) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace

void check_method_windows(const Manifest& m, Diagnostics& diag) {
  for (const auto& grid : m.grids) {
    for (const auto& method_name : grid.methods) {
      const MethodConfig* cfg = find_config(m, method_name);
      if (cfg == nullptr) continue;
      const std::optional<Window> window = window_of(m, *cfg);
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

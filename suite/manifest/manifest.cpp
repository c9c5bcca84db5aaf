#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {
namespace {

template <typename T>
const T* by_name(const std::vector<T>& v, const std::string& name) {
  for (const auto& x : v)
    if (x.name == name) return &x;
  return nullptr;
}

}  // namespace

const Model* Manifest::find_model(const std::string& name) const { return by_name(models, name); }
const Benchmark* Manifest::find_benchmark(const std::string& name) const {
  return by_name(benchmarks, name);
}
const MethodConfig* Manifest::find_method(const std::string& name) const {
  return by_name(methods, name);
}
const Grid* Manifest::find_grid(const std::string& name) const { return by_name(grids, name); }

std::filesystem::path Manifest::resolve(const std::string& path) const {
  std::filesystem::path p(path);
  if (p.is_absolute()) return p;
  return file.parent_path() / p;
}

}  // namespace kvaudit::manifest

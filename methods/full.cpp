// FullMethod (full.h).
#include "methods/full.h"

#include <numeric>

#include "methods/capture_checks.h"

namespace kvaudit::methods {

Selection FullMethod::select(std::span<const LayerCapture> layers, const Budget&,
                             const SelectionContext&) const {
  const int L = check_layers(layers, name());
  std::vector<std::int32_t> all(static_cast<std::size_t>(L));
  std::iota(all.begin(), all.end(), 0);
  Selection selection;
  for (const auto& layer : layers)
    selection.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), all);
  return selection;
}

}  // namespace kvaudit::methods

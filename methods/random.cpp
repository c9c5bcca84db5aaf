// RandomScorer (random.h).
#include "methods/random.h"

#include <Random123/philox.h>

#include <cstddef>

namespace kvaudit::methods {

void RandomScorer::score(const LayerCapture& layer, const SelectionContext& context,
                         std::span<float> scores) const {
  r123::Philox4x32 philox;
  const r123::Philox4x32::key_type key = {{static_cast<std::uint32_t>(context.seed & 0xffffffffu),
                                           static_cast<std::uint32_t>(context.seed >> 32)}};
  const auto L = static_cast<std::size_t>(layer.length);
  for (int h = 0; h < layer.num_kv_heads; ++h) {
    for (std::size_t j = 0; j < L; ++j) {
      const r123::Philox4x32::ctr_type counter = {
          {static_cast<std::uint32_t>(j),
           (static_cast<std::uint32_t>(layer.layer) << 16) | static_cast<std::uint32_t>(h),
           static_cast<std::uint32_t>(context.cell_key & 0xffffffffu),
           static_cast<std::uint32_t>(context.cell_key >> 32)}};
      const auto block = philox(counter, key);
      scores[static_cast<std::size_t>(h) * L + j] = static_cast<float>(block[0] >> 8) * 0x1.0p-24f;
    }
  }
}

}  // namespace kvaudit::methods

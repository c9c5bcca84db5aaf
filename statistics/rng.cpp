// Philox4x32-10 (Random123) and the bootstrap index stream; the layout is documented in rng.h.
#include "statistics/rng.h"

#include <Random123/philox.h>

namespace kvaudit::stats {
namespace {

inline r123::Philox4x32_R<10>::ctr_type philox(std::uint32_t c0, std::uint32_t c1, std::uint32_t c2,
                                               std::uint32_t c3, const PhiloxKey& key) {
  const r123::Philox4x32_R<10> generator;
  const r123::Philox4x32_R<10>::ctr_type counter = {{c0, c1, c2, c3}};
  const r123::Philox4x32_R<10>::key_type k = {{key[0], key[1]}};
  return generator(counter, k);
}

inline std::uint64_t join(std::uint32_t low, std::uint32_t high) {
  return (static_cast<std::uint64_t>(high) << 32) | low;
}

}  // namespace

PhiloxBlock philox4x32_10(const PhiloxCounter& counter, const PhiloxKey& key) {
  const auto r = philox(counter[0], counter[1], counter[2], counter[3], key);
  return {r.v[0], r.v[1], r.v[2], r.v[3]};
}

std::array<std::uint64_t, 2> philox_words(std::uint64_t seed, std::uint32_t replicate,
                                          std::uint32_t pair, std::uint32_t stratum,
                                          RandomPurpose purpose) {
  const auto r =
      philox(replicate, pair, stratum, static_cast<std::uint32_t>(purpose), philox_key(seed));
  return {join(r.v[0], r.v[1]), join(r.v[2], r.v[3])};
}

void draw_resample_indices(std::uint64_t seed, std::uint32_t stratum, std::uint32_t replicate,
                           RandomPurpose purpose, std::uint32_t size, std::uint32_t* indices) {
  const PhiloxKey key = philox_key(seed);
  const auto tag = static_cast<std::uint32_t>(purpose);
  const std::uint32_t pairs = size / 2;
  for (std::uint32_t p = 0; p < pairs; ++p) {
    const auto r = philox(replicate, p, stratum, tag, key);
    indices[2 * p] = static_cast<std::uint32_t>(draw_index(join(r.v[0], r.v[1]), size));
    indices[2 * p + 1] = static_cast<std::uint32_t>(draw_index(join(r.v[2], r.v[3]), size));
  }
  if (size % 2 != 0) {
    const auto r = philox(replicate, pairs, stratum, tag, key);
    indices[size - 1] = static_cast<std::uint32_t>(draw_index(join(r.v[0], r.v[1]), size));
  }
}

}  // namespace kvaudit::stats

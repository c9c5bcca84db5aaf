// How many entries of a KV head a query at a given original position may attend to: the kept
// entries with position ≤ the query's (positions are strictly ascending, so they form a prefix).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace kvaudit::cpu {

inline std::size_t visible_prefix(std::span<const std::int32_t> positions,
                                  std::int32_t query_position) {
  return static_cast<std::size_t>(
      std::upper_bound(positions.begin(), positions.end(), query_position) - positions.begin());
}

}  // namespace kvaudit::cpu

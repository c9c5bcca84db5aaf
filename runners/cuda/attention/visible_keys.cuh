// The masking rule of both prefill attention backends on the device (prefill_attention.h): a query
// at position p sees the entries of its KV head whose position is ≤ p; positions ascend, so those
// are a prefix whose length is an upper bound found by binary search.
#pragma once

#include <cstdint>

namespace kvaudit::cuda {

// Number of the first `count` positions that are ≤ value (positions ascending).
__device__ inline int visible_prefix(const std::int32_t* positions, int count,
                                     std::int32_t value) {
  int low = 0, high = count;
  while (low < high) {
    const int mid = low + (high - low) / 2;
    if (positions[mid] <= value) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return low;
}

}  // namespace kvaudit::cuda

// Size checks for the CPU kernels' span arguments: a mismatch is a programming error inside the
// backend, reported as std::invalid_argument naming the argument and both sizes.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

namespace kvaudit::cpu {

template <typename T>
void require_size(std::span<T> values, std::size_t expected, const char* what) {
  if (values.size() != expected) {
    throw std::invalid_argument(std::string(what) + " has " + std::to_string(values.size()) +
                                " elements, expected " + std::to_string(expected));
  }
}

// A weight matrix [out_features, in_features] given as `weight` (what: its name in messages).
inline void require_weight_shape(std::span<const float> weight, int out_features, int in_features,
                                 const std::string& what) {
  if (out_features < 0 || in_features < 0) {
    throw std::invalid_argument(what + ": negative shape [" + std::to_string(out_features) + ", " +
                                std::to_string(in_features) + "]");
  }
  require_size(weight,
               static_cast<std::size_t>(out_features) * static_cast<std::size_t>(in_features),
               what.c_str());
}

}  // namespace kvaudit::cpu

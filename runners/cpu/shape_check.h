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

}  // namespace kvaudit::cpu

// A count, index or dimension held in a signed integer (as the model and method code keeps them),
// converted to std::size_t for indexing and sizing containers. The callers have checked that the
// value is not negative; the conversion itself checks nothing.
#pragma once

#include <concepts>
#include <cstddef>

namespace kvaudit {

template <std::integral Integer>
constexpr std::size_t to_size(Integer value) {
  return static_cast<std::size_t>(value);
}

}  // namespace kvaudit

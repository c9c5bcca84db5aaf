// EnumSpelling: the one table that spells a small enum for files and command lines (manifest keys,
// record enum members, CLI values), and the two lookups every such enum needs.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace kvaudit {

template <typename E>
struct EnumSpelling {
  E value;
  std::string_view name;
};

// The name of `value` in `table` ("" if absent).
template <typename E, std::size_t N>
constexpr std::string_view spelling_of(const std::array<EnumSpelling<E>, N>& table, E value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return {};
}

// The value called `name` in `table`, if any.
template <typename E, std::size_t N>
constexpr std::optional<E> parse_spelling(const std::array<EnumSpelling<E>, N>& table,
                                          std::string_view name) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  return std::nullopt;
}

}  // namespace kvaudit

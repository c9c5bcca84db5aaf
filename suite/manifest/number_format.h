// Shortest round-trip decimal text of a double ("0.25", "1e-05"), for messages and tables.
#pragma once

#include <charconv>
#include <string>

namespace kvaudit::manifest {

inline std::string format_number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "?";
  return std::string(buf, end);
}

}  // namespace kvaudit::manifest

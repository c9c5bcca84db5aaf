// List parameters in their canonical string form (param_lists.h).
#include "methods/param_lists.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

namespace kvaudit::methods {

std::string format_real_list(const std::vector<double>& values) {
  std::string out;
  for (const double v : values) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
    if (!out.empty()) out += ',';
    out.append(buffer, result.ptr);
  }
  return out;
}

std::optional<std::vector<double>> parse_real_list(const std::string& text) {
  std::vector<double> values;
  if (text.empty()) return std::nullopt;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    double value = 0;
    const char* first = text.data() + begin;
    const char* last = text.data() + end;
    const auto result = std::from_chars(first, last, value);
    if (first == last || result.ec != std::errc() || result.ptr != last || !std::isfinite(value))
      return std::nullopt;
    values.push_back(value);
    if (end == text.size()) break;
    begin = end + 1;
  }
  return values;
}

std::string format_name_list(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) {
    if (!out.empty()) out += ',';
    out += name;
  }
  return out;
}

std::vector<std::string> split_name_list(const std::string& text) {
  std::vector<std::string> names;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    names.push_back(text.substr(begin, end - begin));
    if (end == text.size()) break;
    begin = end + 1;
  }
  return names;
}

}  // namespace kvaudit::methods

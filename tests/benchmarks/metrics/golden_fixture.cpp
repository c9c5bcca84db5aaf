// Reading the metric golden fixtures; see golden_fixture.h.
#include "tests/benchmarks/metrics/golden_fixture.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace kvaudit::metrics::testing {

nlohmann::json load_metrics_golden(const std::string& name) {
  const std::string path = std::string(KVAUDIT_METRICS_GOLDEN_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot open the golden fixture");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(path + ": not valid JSON: " + error.what());
  }
}

CodePointRanges ranges_of(const nlohmann::json& ranges) {
  CodePointRanges out;
  for (const auto& range : ranges) {
    out.emplace_back(range.at(0).get<char32_t>(), range.at(1).get<char32_t>());
  }
  return out;
}

bool in_ranges(const CodePointRanges& ranges, char32_t c) {
  const auto it =
      std::upper_bound(ranges.begin(), ranges.end(), c,
                       [](char32_t value, const auto& range) { return value < range.first; });
  return it != ranges.begin() && c <= std::prev(it)->second;
}

std::vector<std::string> strings_of(const nlohmann::json& array) {
  std::vector<std::string> out;
  for (const auto& item : array) out.push_back(item.get<std::string>());
  return out;
}

}  // namespace kvaudit::metrics::testing

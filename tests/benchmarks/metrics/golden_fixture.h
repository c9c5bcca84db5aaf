// Reading the metric golden fixtures of tests/golden/metrics/ (written by
// tools/golden/make_metrics_golden.py).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kvaudit::metrics::testing {

// Parses tests/golden/metrics/<name>; throws std::runtime_error naming the file when it is
// missing or not JSON.
nlohmann::json load_metrics_golden(const std::string& name);

// [[lo, hi], ...] ranges of code points.
using CodePointRanges = std::vector<std::pair<char32_t, char32_t>>;
CodePointRanges ranges_of(const nlohmann::json& ranges);
bool in_ranges(const CodePointRanges& ranges, char32_t c);  // ranges sorted, disjoint

// A UTF-8 string field as bytes.
std::vector<std::string> strings_of(const nlohmann::json& array);

}  // namespace kvaudit::metrics::testing

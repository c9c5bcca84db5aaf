// List parameters (catalog.h ParamType::real_list, method_ref_list): a manifest writes a TOML
// array; the manifest layer and resolve_method keep it in a ParamValue as one canonical string, so
// that ParamValue, the records and every existing manifest's canonical hash stay as they were:
//   real_list        [0.25, 0.5, 0.75]  ->  "0.25,0.5,0.75"  (each number the shortest decimal that
//                                            reads back to the same double, std::to_chars)
//   method_ref_list  ["snap", "knorm"]  ->  "snap,knorm"     (config names cannot contain ',')
// The canonical JSON (suite/manifest/canonical.cpp) expands them back into arrays.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvaudit::methods {

std::string format_real_list(const std::vector<double>& values);
// nullopt when the text is not a non-empty ','-separated list of finite numbers.
std::optional<std::vector<double>> parse_real_list(const std::string& text);

std::string format_name_list(const std::vector<std::string>& names);
// The names of a method_ref_list string (empty items are kept, for the caller to refuse).
std::vector<std::string> split_name_list(const std::string& text);

}  // namespace kvaudit::methods

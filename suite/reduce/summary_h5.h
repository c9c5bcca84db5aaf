// summary.h5: every table of the report as an HDF5 compound dataset /tables/<id>, one member per
// column (text: variable-length UTF-8; integer: int64, not-applicable = INT64_MIN; real and
// p-value: float64, not-applicable = NaN; flag: the h5py boolean enum FALSE/TRUE on int8), with
// the table's title, description and attributes (family, m, alpha, B, seed, quantile rule, ...) as
// string attributes of the dataset. Root attributes: the study's provenance (study, manifest hash,
// kvaudit version and commit, creation time, coverage). Read with h5py:
// f['tables/protocol_gap'][:].
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "suite/reduce/table.h"

namespace kvaudit::reduce {

// Creates `file` (refusing to replace an existing one) and writes the tables and root attributes.
// Throws InternalError naming the file when HDF5 fails.
void write_summary_h5(const std::filesystem::path& file, const std::vector<Table>& tables,
                      const std::vector<std::pair<std::string, std::string>>& root_attributes);

inline constexpr std::int64_t kH5IntegerNotApplicable = INT64_MIN;

}  // namespace kvaudit::reduce

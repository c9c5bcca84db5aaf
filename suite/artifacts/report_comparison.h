// `kvaudit verify`: the bundled report against the one recomputed from the bundled shards.
// Per table id: tables/<id>.csv byte for byte (the CSV writes every number in its shortest exact
// form, so equal bytes mean equal values), and summary.h5's /tables/<id> value by value at the
// stored precision (text exactly, integers exactly, doubles bit for bit — NaN marks "not
// applicable" in both). The first difference is named: row, column, both values.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kvaudit::artifacts {

struct TableVerdict {
  std::string table;
  std::string csv;         // "match", "differs: …", "missing from the bundle", "not recomputed"
  std::string summary_h5;  // likewise for summary.h5 ("" when neither file has the table)
  bool ok() const { return csv == "match" && (summary_h5 == "match" || summary_h5.empty()); }
};

// `bundled` and `recomputed` are report directories (tables/, summary.h5).
std::vector<TableVerdict> compare_reports(const std::filesystem::path& bundled,
                                          const std::filesystem::path& recomputed);

}  // namespace kvaudit::artifacts

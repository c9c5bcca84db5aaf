// Which Bonferroni family an analysis table's intervals and tests are corrected over.
//
// Declared: the manifest's [[statistics.families]] entry for the analysis, with the m the lock
// recorded at plan time (the number of distinct combinations of its `over` dimensions among the
// cells of that analysis). Each interval is then computed at level 1 − α/m. When the family's
// dimensions are coarser than the table's rows, rows that differ only outside `over` belong to
// different instances of the family (e.g. a family over [method] is a family of m methods within
// each model, budget, ...); when it names dimensions the rows pool over, m counts them too, which
// is conservative.
// Default (nothing declared for the analysis): one family per table made of all its expected rows,
// named "<table id>", with m = the number of rows the expansion implies (missing data does not
// shrink it), at the manifest's α.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "statistics/clopper_pearson.h"
#include "suite/reduce/lock_check.h"

namespace kvaudit::reduce {

struct ResolvedFamily {
  std::string name;
  std::string analysis;
  std::vector<std::string> over;
  std::int64_t m = 1;
  double alpha = 0.05;
  bool declared = false;
  std::string note;  // how it was chosen (printed with the table)

  double per_comparison_alpha() const { return alpha / static_cast<double>(m); }
  stats::Family family() const;
  // "family NAME (declared|per table), m = M, alpha = A" for table attributes.
  std::string describe() const;
};

// The family for one table of `analysis` whose rows are indexed by `row_dims` and of which the
// expansion implies `expected_rows` rows.
ResolvedFamily resolve_family(const std::vector<LockedFamily>& families, double alpha,
                              const std::string& analysis, const std::string& table_id,
                              const std::vector<std::string>& row_dims, std::int64_t expected_rows);

// Adds family, m, alpha, per-comparison alpha and dimensions as table attributes.
struct Table;
void add_family_attributes(Table& table, const ResolvedFamily& family);

}  // namespace kvaudit::reduce

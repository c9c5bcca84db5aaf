// LaTeX (booktabs) of a table, ready to paste into a paper: \toprule/\midrule/\bottomrule, the
// columns marked in_latex, text left-aligned and numbers right-aligned, the family and m in the
// caption, partial rows marked with a dagger and explained under the table. Tables of more than
// 40 rows use longtable. Needs \usepackage{booktabs} (and longtable for long tables); the file's
// first lines say so.
// Text is escaped: \ & % $ # _ { } ~ ^ and the Greek letters, dashes and symbols the tables use.
#pragma once

#include <ostream>
#include <string>

#include "suite/reduce/table.h"

namespace kvaudit::reduce {

std::string latex_escape(const std::string& text);
void write_latex(std::ostream& out, const Table& table);

// Rows above which longtable is used.
inline constexpr std::size_t kLatexLongtableRows = 40;

}  // namespace kvaudit::reduce

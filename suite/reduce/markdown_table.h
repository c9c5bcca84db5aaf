// A table as GitHub-flavoured Markdown for report.md: the title as a heading, what it means, its
// attributes (family and m, B, seed, ...), the rows (up to markdown_row_limit, then a pointer to
// the CSV), partial rows marked with a dagger.
#pragma once

#include <ostream>
#include <string>

#include "suite/reduce/table.h"

namespace kvaudit::reduce {

// `csv_path` / `latex_path`: where the full table lies, relative to report.md ("" if not written).
void write_markdown_table(std::ostream& out, const Table& table, const std::string& csv_path,
                          const std::string& latex_path);
std::string markdown_escape(const std::string& text);

}  // namespace kvaudit::reduce

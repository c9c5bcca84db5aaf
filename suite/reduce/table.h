// The report's table model: typed columns, rows of values, and the metadata every writer prints
// (title, what the table means, the Bonferroni family and m, B, seed, quantile rule, ...).
// Writers: csv_writer.h (every row, full precision), latex_writer.h (booktabs), markdown_table.h
// (report.md), summary_h5.h (a compound dataset per table with the metadata as attributes).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kvaudit::reduce {

// pvalue: a real shown with format_p (4 significant digits) instead of fixed decimals.
enum class ColumnType { text, integer, real, pvalue, flag };

struct Column {
  std::string name;  // CSV header, HDF5 member name: [a-z0-9_]
  ColumnType type = ColumnType::text;
  int digits = 4;        // decimals shown in Markdown and LaTeX (real columns)
  bool in_latex = true;  // LaTeX tables show a subset so that they fit a page
  std::string header;    // human header for Markdown / LaTeX; defaults to name
};

// monostate = not applicable (NaN / empty in CSV, "—" in Markdown and LaTeX).
using Value = std::variant<std::monostate, std::string, std::int64_t, double, bool>;

// v, or monostate (not applicable) when v is NaN or infinite.
inline Value finite_or_empty(double v) { return std::isfinite(v) ? Value{v} : Value{}; }

struct Table {
  std::string id;           // file stem and HDF5 dataset name: [a-z0-9_]
  std::string title;        // one line
  std::string description;  // what the table means and how its numbers are computed
  std::vector<Column> columns;
  std::vector<std::vector<Value>> rows;
  // Printed under the title, written as HDF5 attributes: family, m, alpha, B, seed, ...
  std::vector<std::pair<std::string, std::string>> attributes;
  // Index of a flag column whose true rows are marked partial († in Markdown and LaTeX), or -1.
  int partial_column = -1;
  // Rows shown in report.md before "… N more rows in the CSV" (0: all).
  std::size_t markdown_row_limit = 60;
  // Sentences report.md prints under the table (e.g. how reuse rows were resampled).
  std::vector<std::string> notes;
  bool write_latex = true;

  // Adds a column and returns its index.
  std::size_t add_column(std::string name, ColumnType type, int digits = 4, bool in_latex = true,
                         std::string header = "");
  std::size_t column_index(const std::string& name) const;  // throws std::out_of_range
  void add_attribute(std::string key, std::string value);
  // Number of rows flagged partial.
  std::size_t partial_rows() const;
};

// The table with this id, or nullptr.
const Table* find_table(const std::vector<Table>& tables, const std::string& id);

// The note under every table with reuse rows (docs/design/reuse.md §Reduce).
inline constexpr const char* kReuseIntervalNote =
    "Reuse rows: intervals resample contexts (cluster bootstrap: all questions of a context "
    "together).";

// Formats a real the way Markdown and LaTeX show it: fixed with `digits` decimals; NaN as "".
std::string format_fixed(double v, int digits);
// Shortest round-trip text of a real (CSV, HDF5 attributes); NaN as "".
std::string format_exact(double v);
// A p-value: 4 significant digits, scientific below 1e-4.
std::string format_p(double p);

}  // namespace kvaudit::reduce

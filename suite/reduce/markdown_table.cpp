// Markdown rendering of a table (see markdown_table.h).
#include "suite/reduce/markdown_table.h"

namespace kvaudit::reduce {
namespace {

std::string markdown_cell_text(const Column& c, const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return "—";
  if (const auto* s = std::get_if<std::string>(&v)) return markdown_escape(*s);
  if (const auto* n = std::get_if<std::int64_t>(&v)) return std::to_string(*n);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "yes" : "";
  const double d = std::get<double>(v);
  const std::string s = c.type == ColumnType::pvalue ? format_p(d) : format_fixed(d, c.digits);
  return s.empty() ? "—" : s;
}

}  // namespace

std::string markdown_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|' || c == '*' || c == '_' || c == '`' || c == '<' || c == '>' || c == '[' ||
        c == ']')
      out += '\\';
    if (c == '\n' || c == '\r') {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

void write_markdown_table(std::ostream& out, const Table& t, const std::string& csv_path,
                          const std::string& latex_path) {
  out << "### " << t.title << "\n\n" << t.description << "\n\n";
  for (const auto& [k, v] : t.attributes) out << "- " << k << ": " << markdown_escape(v) << "\n";
  std::string files;
  if (!csv_path.empty()) files += "[CSV](" + csv_path + ")";
  if (!latex_path.empty())
    files += std::string(files.empty() ? "" : ", ") + "[LaTeX](" + latex_path + ")";
  if (!files.empty()) out << "- files: " << files << "\n";
  out << "\n";
  if (t.rows.empty()) {
    out << "(no rows)\n\n";
    return;
  }
  // Markdown shows the LaTeX subset of the columns plus the partial flag, as in the paper table.
  std::vector<std::size_t> cols;
  for (std::size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i].in_latex) cols.push_back(i);
  out << "|";
  for (std::size_t i : cols) out << " " << markdown_escape(t.columns[i].header) << " |";
  out << "\n|";
  for (std::size_t i : cols) out << (t.columns[i].type == ColumnType::text ? " --- |" : " ---: |");
  out << "\n";
  const std::size_t limit =
      t.markdown_row_limit == 0 ? t.rows.size() : std::min(t.rows.size(), t.markdown_row_limit);
  for (std::size_t r = 0; r < limit; ++r) {
    const auto& row = t.rows[r];
    bool is_partial = false;
    if (t.partial_column >= 0) {
      const auto* b = std::get_if<bool>(&row[static_cast<std::size_t>(t.partial_column)]);
      is_partial = b != nullptr && *b;
    }
    out << "|";
    for (std::size_t k = 0; k < cols.size(); ++k) {
      out << " " << markdown_cell_text(t.columns[cols[k]], row[cols[k]]);
      if (k == 0 && is_partial) out << " †";
      out << " |";
    }
    out << "\n";
  }
  out << "\n";
  if (limit < t.rows.size())
    out << "… " << (t.rows.size() - limit) << " more rows in the CSV (" << t.rows.size()
        << " in all).\n\n";
  if (const std::size_t partial = t.partial_rows(); partial > 0)
    out << "† partial: " << partial << " of " << t.rows.size()
        << " rows are computed from groups with missing or failed cells.\n\n";
  for (const auto& note : t.notes) out << note << "\n\n";
}

}  // namespace kvaudit::reduce

// The report's table model (see table.h).
#include "suite/reduce/table.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace kvaudit::reduce {

std::size_t Table::add_column(std::string name, ColumnType type, int digits, bool in_latex,
                              std::string header) {
  Column c;
  c.header = header.empty() ? name : std::move(header);
  c.name = std::move(name);
  c.type = type;
  c.digits = digits;
  c.in_latex = in_latex;
  columns.push_back(std::move(c));
  return columns.size() - 1;
}

std::size_t Table::column_index(const std::string& name) const {
  for (std::size_t i = 0; i < columns.size(); ++i)
    if (columns[i].name == name) return i;
  throw std::out_of_range("table " + id + " has no column " + name);
}

void Table::add_attribute(std::string key, std::string value) {
  attributes.emplace_back(std::move(key), std::move(value));
}

std::size_t Table::partial_rows() const {
  if (partial_column < 0) return 0;
  std::size_t n = 0;
  for (const auto& row : rows) {
    const auto& v = row[static_cast<std::size_t>(partial_column)];
    if (const bool* b = std::get_if<bool>(&v); b != nullptr && *b) ++n;
  }
  return n;
}

std::string format_fixed(double v, int digits) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s = buf;
  if (s.size() > 1 && s[0] == '-') {  // "-0.000" -> "0.000"
    bool zero = true;
    for (char ch : s.substr(1))
      if (ch != '0' && ch != '.') zero = false;
    if (zero) s = s.substr(1);
  }
  return s;
}

const Table* find_table(const std::vector<Table>& tables, const std::string& id) {
  for (const auto& t : tables)
    if (t.id == id) return &t;
  return nullptr;
}

std::string format_exact(double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "";
  return std::string(buf, end);
}

std::string format_p(double p) {
  if (!std::isfinite(p)) return "";
  char buf[64];
  if (p != 0 && p < 1e-4)
    std::snprintf(buf, sizeof buf, "%.2e", p);
  else
    std::snprintf(buf, sizeof buf, "%.4g", p);
  return buf;
}

}  // namespace kvaudit::reduce

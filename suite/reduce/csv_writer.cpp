// CSV writer (see csv_writer.h).
#include "suite/reduce/csv_writer.h"

namespace kvaudit::reduce {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

void write_csv(std::ostream& out, const Table& table) {
  for (std::size_t i = 0; i < table.columns.size(); ++i)
    out << (i ? "," : "") << csv_field(table.columns[i].name);
  out << "\n";
  for (const auto& row : table.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i) out << ",";
      const Value& v = row[i];
      if (const auto* s = std::get_if<std::string>(&v))
        out << csv_field(*s);
      else if (const auto* n = std::get_if<std::int64_t>(&v))
        out << *n;
      else if (const auto* d = std::get_if<double>(&v))
        out << format_exact(*d);
      else if (const auto* b = std::get_if<bool>(&v))
        out << (*b ? "true" : "false");
    }
    out << "\n";
  }
}

}  // namespace kvaudit::reduce

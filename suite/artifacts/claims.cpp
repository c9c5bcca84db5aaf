// `kvaudit verify --claims` (see claims.h).
#include "suite/artifacts/claims.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "base/errors.h"
#include "suite/artifacts/csv_table.h"

namespace kvaudit::artifacts {
namespace {

struct PrintedNumber {
  double value = 0;
  int decimals = 0;
  bool percent = false;
};

// A number as printed (optional sign, digits, optional fraction, optional trailing %), or false.
bool parse_printed(const std::string& text, PrintedNumber& out) {
  std::string s = text;
  out.percent = !s.empty() && s.back() == '%';
  if (out.percent) s.pop_back();
  if (s.empty()) return false;
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  std::size_t digits = 0, point = std::string::npos;
  for (std::size_t k = i; k < s.size(); ++k) {
    if (s[k] >= '0' && s[k] <= '9') {
      ++digits;
    } else if (s[k] == '.' && point == std::string::npos) {
      point = k;
    } else {
      return false;
    }
  }
  if (digits == 0) return false;
  out.decimals = point == std::string::npos ? 0 : static_cast<int>(s.size() - point - 1);
  const char* first = s.data() + (s[0] == '+' ? 1 : 0);
  const auto [ptr, ec] = std::from_chars(first, s.data() + s.size(), out.value);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::vector<std::pair<std::string, std::string>> conditions(const std::string& row) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t start = 0;
  while (start <= row.size()) {
    const std::size_t end = row.find(';', start);
    const std::string part =
        row.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      out.clear();
      return out;
    }
    out.emplace_back(part.substr(0, eq), part.substr(eq + 1));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string format_claim_value(double value, int decimals, bool percent) {
  double v = percent ? value * 100.0 : value;
  const double scale = std::pow(10.0, decimals);
  v = std::round(v * scale) / scale;  // half away from zero
  if (v == 0) v = 0;                  // −0 prints as 0
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, v);
  return std::string(buffer) + (percent ? "%" : "");
}

std::vector<Claim> parse_claims(const std::string& text, const std::string& file) {
  const CsvTable csv = parse_csv(text, file);
  if (csv.header != std::vector<std::string>{"table", "row", "column", "value"}) {
    throw InputError(file + ": line 1: the header must be 'table,row,column,value'");
  }
  std::vector<Claim> out;
  for (std::size_t r = 0; r < csv.rows.size(); ++r) {
    const auto& f = csv.rows[r];
    Claim c{r + 2, f[0], f[1], f[2], f[3]};
    if (c.table.empty() || c.column.empty() || c.value.empty()) {
      throw InputError(file + ": line " + std::to_string(c.line) +
                       ": table, column and value must not be empty");
    }
    if (c.table.find('/') != std::string::npos || c.table.find("..") != std::string::npos) {
      throw InputError(file + ": line " + std::to_string(c.line) + ": table '" + c.table +
                       "' is not a table id");
    }
    if (!c.row.empty() && conditions(c.row).empty()) {
      throw InputError(file + ": line " + std::to_string(c.line) + ": row '" + c.row +
                       "' is not 'column=value[;column=value…]'");
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<ClaimResult> check_claims(const std::vector<Claim>& claims,
                                      const std::string& table_dir) {
  std::map<std::string, CsvTable> tables;
  std::map<std::string, std::string> unreadable;
  std::vector<ClaimResult> out;
  for (const Claim& claim : claims) {
    ClaimResult result{claim, false, ""};
    if (!tables.contains(claim.table) && !unreadable.contains(claim.table)) {
      const std::filesystem::path file = std::filesystem::path(table_dir) / (claim.table + ".csv");
      try {
        tables.emplace(claim.table, read_csv_file(file.string()));
      } catch (const InputError& e) {
        unreadable.emplace(claim.table, e.what());
      }
    }
    if (const auto it = unreadable.find(claim.table); it != unreadable.end()) {
      result.detail = "no such table in the report (" + it->second + ")";
      out.push_back(std::move(result));
      continue;
    }
    const CsvTable& t = tables.at(claim.table);
    const int column = t.column(claim.column);
    if (column < 0) {
      result.detail = "table " + claim.table + " has no column '" + claim.column + "'";
      out.push_back(std::move(result));
      continue;
    }
    std::vector<std::pair<int, std::string>> want;
    bool bad_condition = false;
    for (const auto& [name, value] : conditions(claim.row)) {
      const int c = t.column(name);
      if (c < 0) {
        result.detail = "table " + claim.table + " has no column '" + name + "' (row key)";
        bad_condition = true;
        break;
      }
      want.emplace_back(c, value);
    }
    if (bad_condition) {
      out.push_back(std::move(result));
      continue;
    }
    std::vector<const std::vector<std::string>*> matches;
    for (const auto& row : t.rows) {
      bool all = true;
      for (const auto& [c, value] : want) all = all && row[static_cast<std::size_t>(c)] == value;
      if (all) matches.push_back(&row);
    }
    if (matches.size() != 1) {
      result.detail = "the row key matches " + std::to_string(matches.size()) + " rows of table " +
                      claim.table + " (it must select exactly one)";
      out.push_back(std::move(result));
      continue;
    }
    const std::string& cell = (*matches.front())[static_cast<std::size_t>(column)];
    PrintedNumber printed;
    double value = 0;
    const auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
    const bool cell_is_number =
        !cell.empty() && ec == std::errc() && ptr == cell.data() + cell.size();
    if (parse_printed(claim.value, printed) && cell_is_number) {
      const std::string rounded = format_claim_value(value, printed.decimals, printed.percent);
      const std::string claimed = format_claim_value(
          printed.value / (printed.percent ? 100.0 : 1.0), printed.decimals, printed.percent);
      result.contained = rounded == claimed;
      result.detail = "report " + cell + " → " + rounded + " at the printed precision";
    } else {
      result.contained = cell == claim.value;
      result.detail = "report '" + cell + "'";
    }
    out.push_back(std::move(result));
  }
  return out;
}

}  // namespace kvaudit::artifacts

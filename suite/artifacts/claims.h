// `kvaudit verify --claims FILE`: are the numbers a paper prints ones the report contains?
//
// FILE is CSV with the header `table,row,column,value`, one claim per line:
//   table   a report table id (tables/<table>.csv), e.g. accuracy
//   row     which row: `column=value` conditions joined by ';' that together select exactly one
//           row, compared with the CSV text of those columns (e.g.
//           `method=snapkv;budget=compression=0.5` — the first '=' separates the column name from
//           the value)
//   column  the column whose value is claimed
//   value   the value as printed: a number (its decimals are the printed precision; a trailing %
//           means the table's value × 100), or text compared exactly
// A number is contained when the table's value rounded half away from zero to the printed
// decimals prints as the claim (−0 as 0); `format_claim_value` is that rounding.
#pragma once

#include <string>
#include <vector>

namespace kvaudit::artifacts {

struct Claim {
  std::size_t line = 0;  // in the claims file (header = line 1)
  std::string table, row, column, value;
};

struct ClaimResult {
  Claim claim;
  bool contained = false;
  std::string detail;  // what the report holds, or why the claim cannot be checked
};

// InputError naming the file and line for a malformed claims file (header, width, empty fields).
std::vector<Claim> parse_claims(const std::string& text, const std::string& file);

// `table_dir` holds the report's tables/<id>.csv.
std::vector<ClaimResult> check_claims(const std::vector<Claim>& claims,
                                      const std::string& table_dir);

// `value` printed with `decimals` digits after the point (rounded half away from zero), ×100
// first when `percent`. Exposed for tests.
std::string format_claim_value(double value, int decimals, bool percent);

}  // namespace kvaudit::artifacts

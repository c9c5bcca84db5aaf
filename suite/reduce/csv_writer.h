// CSV (RFC 4180) of a table: a header of column names, every row, reals in shortest round-trip
// form, not-applicable as an empty field, flags as true/false. Fields with a comma, quote or line
// break are quoted, quotes doubled.
#pragma once

#include <ostream>
#include <string>

#include "suite/reduce/table.h"

namespace kvaudit::reduce {

void write_csv(std::ostream& out, const Table& table);
std::string csv_field(const std::string& text);

}  // namespace kvaudit::reduce

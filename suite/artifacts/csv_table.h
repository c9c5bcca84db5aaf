// A small CSV reader for the report's tables and for claims files (both untrusted when they come
// from elsewhere): RFC 4180 fields (quoted fields may hold commas, doubled quotes and newlines),
// "\n" or "\r\n" line ends, a header row, every row as wide as the header. Bounds: 64 MiB of
// text, 1,000,000 rows, 10,000 columns.
#pragma once

#include <string>
#include <vector>

namespace kvaudit::artifacts {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // The index of `column` in the header, or -1.
  int column(const std::string& name) const;
};

// InputError naming `what`, the line and the problem (an unterminated quote, a row of another
// width, text after a closing quote, a size bound).
CsvTable parse_csv(const std::string& text, const std::string& what);

// Reads and parses a file (InputError when it cannot be read).
CsvTable read_csv_file(const std::string& path);

}  // namespace kvaudit::artifacts

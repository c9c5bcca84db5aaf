// A small CSV reader (see csv_table.h).
#include "suite/artifacts/csv_table.h"

#include <fstream>
#include <sstream>

#include "base/errors.h"

namespace kvaudit::artifacts {

int CsvTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

CsvTable parse_csv(const std::string& text, const std::string& what) {
  constexpr std::size_t kMaxBytes = 64u << 20, kMaxRows = 1'000'000, kMaxColumns = 10'000;
  if (text.size() > kMaxBytes) throw InputError(what + ": larger than 64 MiB");
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  std::size_t line = 1, i = 0;
  const auto fail = [&](const std::string& problem) {
    return InputError(what + ": line " + std::to_string(line) + ": " + problem);
  };
  const auto end_field = [&] {
    if (record.size() >= kMaxColumns) throw fail("more than 10,000 columns");
    record.push_back(std::move(field));
    field.clear();
  };
  const auto end_record = [&] {
    end_field();
    if (records.size() >= kMaxRows + 1) throw fail("more than 1,000,000 rows");
    records.push_back(std::move(record));
    record.clear();
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"' && field.empty()) {
      ++i;
      bool closed = false;
      while (i < text.size()) {
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          closed = true;
          break;
        }
        if (text[i] == '\n') ++line;
        field += text[i++];
      }
      if (!closed) throw fail("a quoted field is not closed");
      if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
        throw fail("text after a closing quote");
      }
      continue;
    }
    if (c == ',') {
      end_field();
      ++i;
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      end_record();
      i += 2;
      ++line;
    } else if (c == '\n') {
      end_record();
      ++i;
      ++line;
    } else {
      field += c;
      ++i;
    }
  }
  if (!field.empty() || !record.empty()) end_record();
  if (records.empty()) throw InputError(what + ": empty (no header row)");
  CsvTable table;
  table.header = std::move(records.front());
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != table.header.size()) {
      throw InputError(what + ": row " + std::to_string(r) + " has " +
                       std::to_string(records[r].size()) + " fields, the header " +
                       std::to_string(table.header.size()));
    }
    table.rows.push_back(std::move(records[r]));
  }
  return table;
}

CsvTable read_csv_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot be read");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_csv(buffer.str(), path);
}

}  // namespace kvaudit::artifacts

// Python str.format for simple "{name}" fields (see python_format.h).
#include "suite/benchmarks/longbench/python_format.h"

#include <stdexcept>

namespace kvaudit::benchmarks {
namespace {

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

[[noreturn]] void fail(std::string_view template_text, std::size_t offset, std::string_view what) {
  std::string snippet(template_text.substr(offset, 20));
  throw std::invalid_argument("python_format: template byte " + std::to_string(offset) + " (\"" +
                              snippet + "\"): " + std::string(what));
}

}  // namespace

std::string python_format(std::string_view template_text, const FormatFieldLookup& lookup) {
  std::string out;
  out.reserve(template_text.size());
  std::size_t i = 0;
  while (i < template_text.size()) {
    const char c = template_text[i];
    if (c == '}') {
      if (i + 1 < template_text.size() && template_text[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      fail(template_text, i, "single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < template_text.size() && template_text[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    const std::size_t close = template_text.find('}', i + 1);
    if (close == std::string_view::npos) fail(template_text, i, "single '{' encountered");
    const std::string_view name = template_text.substr(i + 1, close - i - 1);
    if (name.empty()) fail(template_text, i, "positional field '{}' is not supported");
    for (const char n : name) {
      if (!is_identifier_char(n)) {
        fail(template_text, i,
             "only plain '{name}' fields are supported (no index, attribute, "
             "conversion or format spec)");
      }
    }
    if (name.front() >= '0' && name.front() <= '9') {
      fail(template_text, i, "positional field '{" + std::string(name) + "}' is not supported");
    }
    const std::optional<std::string_view> value = lookup(name);
    if (!value) fail(template_text, i, "no field named '" + std::string(name) + "' (KeyError)");
    out += *value;
    i = close + 1;
  }
  return out;
}

}  // namespace kvaudit::benchmarks

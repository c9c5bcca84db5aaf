// Reading RULER input files (see text_file.h).
#include "suite/benchmarks/ruler/text_file.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <system_error>

#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

// Offset of the first byte that breaks UTF-8 (overlongs, surrogates and > U+10FFFF included), or
// npos.
std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xe0) == 0xc0) {
      len = 2;
      cp = b & 0x1fu;
    } else if ((b & 0xf0) == 0xe0) {
      len = 3;
      cp = b & 0x0fu;
    } else if ((b & 0xf8) == 0xf0) {
      len = 4;
      cp = b & 0x07u;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (c & 0x3fu);
    }
    const bool overlong =
        (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

std::size_t line_of_offset(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<std::size_t>(std::count(
                 text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

std::string read_text_file(const std::filesystem::path& path, std::string_view what) {
  const std::string name = std::string(what) + " file " + path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(name + ": does not exist or is not a regular file");
  }
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw InputError(name + ": cannot read its size (" + ec.message() + ")");
  if (size > (std::uintmax_t{1} << 31)) throw InputError(name + ": larger than 2 GiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(name + ": cannot be opened");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(name + ": read failed");
  const std::size_t bad = first_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    throw InputError(name + ":" + std::to_string(line_of_offset(text, bad)) +
                     ": not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  return text;
}

}  // namespace kvaudit::benchmarks::ruler

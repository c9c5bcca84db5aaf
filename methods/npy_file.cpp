// NumPy .npy reader and LU-KV's budget-curve check (npy_file.h).
#include "methods/npy_file.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "methods/artefact_files.h"

namespace kvaudit::methods {
namespace {

constexpr unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
// Far beyond any real header (numpy itself refuses headers over 10 000 bytes by default).
constexpr std::uint64_t kMaxHeaderBytes = 1u << 20;
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 40;

// A cursor over the header text: the small subset of Python literal syntax numpy writes.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  bool peek(char c) {
    skip_spaces();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c, const std::string& what) {
    if (!peek(c)) bad(std::string("expected '") + c + "' " + what);
    ++pos_;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  // A quoted string ('...' or "..."), no escapes (numpy's keys and descr have none).
  std::string quoted(const char* what) {
    skip_spaces();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      bad(std::string("expected a quoted string ") + what);
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') bad(std::string("escape sequences are not supported in ") + what);
      ++pos_;
    }
    if (pos_ >= text_.size()) bad(std::string("unterminated string ") + what);
    return std::string(text_.substr(start, pos_++ - start));
  }
  bool boolean(const char* what) {
    skip_spaces();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const std::size_t n = std::strlen(word);
      if (text_.substr(pos_, n) == word) {
        pos_ += n;
        return value;
      }
    }
    bad(std::string("expected True or False ") + what);
  }
  std::int64_t dimension() {
    skip_spaces();
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9')
      bad("expected a non-negative integer in 'shape'");
    std::int64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + (text_[pos_++] - '0');
      if (v > kMaxDimension) bad("a dimension of 'shape' exceeds 2^40");
    }
    (void)accept('L');  // Python 2's long suffix, which old numpy wrote
    return v;
  }
  // (d0, d1, ...) with an optional trailing comma; () is a scalar.
  std::vector<std::int64_t> shape() {
    expect('(', "to open 'shape'");
    std::vector<std::int64_t> dims;
    while (!accept(')')) {
      if (dims.size() >= 32) bad("'shape' has more than 32 dimensions");
      dims.push_back(dimension());
      if (accept(')')) break;
      expect(',', "between the dimensions of 'shape'");
    }
    return dims;
  }
  [[noreturn]] void bad(const std::string& what) const {
    fail_artefact(source_,
                  "npy header: " + what + " at offset " + std::to_string(pos_) + " of the header");
  }

 private:
  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

struct Header {
  std::string descr;
  std::vector<std::int64_t> shape;
};

Header parse_header(std::string_view text, const std::string& source) {
  HeaderParser p(text, source);
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::int64_t>> shape;
  p.expect('{', "at the start of the header dict");
  while (!p.accept('}')) {
    const std::string key = p.quoted("(a header key)");
    p.expect(':', "after header key '" + key + "'");
    if (key == "descr") {
      if (descr) p.bad("duplicate key 'descr'");
      if (p.peek('[')) p.bad("'descr' is a structured dtype (a list), not supported");
      descr = p.quoted("as 'descr'");
    } else if (key == "fortran_order") {
      if (fortran_order) p.bad("duplicate key 'fortran_order'");
      fortran_order = p.boolean("as 'fortran_order'");
    } else if (key == "shape") {
      if (shape) p.bad("duplicate key 'shape'");
      shape = p.shape();
    } else {
      p.bad("unexpected key '" + key + "' (want descr, fortran_order, shape)");
    }
    if (p.accept('}')) break;
    p.expect(',', "between header entries");
  }
  p.skip_spaces();
  if (!p.at_end()) p.bad("text after the header dict");
  if (!descr) fail_artefact(source, "npy header: missing key 'descr'");
  if (!fortran_order) fail_artefact(source, "npy header: missing key 'fortran_order'");
  if (!shape) fail_artefact(source, "npy header: missing key 'shape'");
  if (*descr != "<f4" && *descr != "<f8")
    fail_artefact(source,
                  "npy dtype '" + *descr +
                      "' is not supported (want '<f4' or '<f8': little-endian float32 / float64; "
                      "object arrays are never read)");
  if (*fortran_order) fail_artefact(source, "npy array is in Fortran order (want C order)");
  return {*descr, *shape};
}

std::uint32_t little_endian(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

NpyArray parse_npy(const std::vector<unsigned char>& bytes, const std::string& source) {
  if (bytes.size() < 10)
    fail_artefact(source, "too short for an npy file (" + std::to_string(bytes.size()) + " bytes)");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    fail_artefact(source, "not an npy file (the magic \\x93NUMPY is missing)");
  const int major = bytes[6];
  const int minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    fail_artefact(source, "npy format version " + std::to_string(major) + "." +
                              std::to_string(minor) + " is not supported (want 1.0, 2.0 or 3.0)");
  const int length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + static_cast<std::size_t>(length_bytes);
  if (bytes.size() < prefix) fail_artefact(source, "truncated npy header length");
  const std::uint64_t header_bytes = little_endian(bytes.data() + 8, length_bytes);
  if (header_bytes > kMaxHeaderBytes)
    fail_artefact(source, "npy header length " + std::to_string(header_bytes) + " exceeds 1 MiB");
  if (header_bytes > bytes.size() - prefix)
    fail_artefact(source, "npy header length " + std::to_string(header_bytes) +
                              " runs past the end of the " + std::to_string(bytes.size()) +
                              "-byte file");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + prefix),
                              static_cast<std::size_t>(header_bytes));
  if (text.empty() || text.back() != '\n')
    fail_artefact(source, "npy header does not end in a newline");
  if (text.find('\0') != std::string_view::npos)
    fail_artefact(source, "npy header contains a NUL byte");
  Header header = parse_header(text, source);

  const std::size_t element_bytes = header.descr == "<f4" ? 4 : 8;
  std::uint64_t count = 1;
  for (const std::int64_t d : header.shape) {
    const auto dim = static_cast<std::uint64_t>(d);
    if (dim != 0 && count > std::numeric_limits<std::uint64_t>::max() / element_bytes / dim)
      fail_artefact(source,
                    "npy shape " + shape_text(header.shape) + " overflows the element count");
    count *= dim;
  }
  const std::size_t data_start = prefix + static_cast<std::size_t>(header_bytes);
  const std::uint64_t data_bytes = bytes.size() - data_start;
  if (count * element_bytes != data_bytes)
    fail_artefact(source, "npy shape " + shape_text(header.shape) + " of " + header.descr +
                              " needs " + std::to_string(count * element_bytes) +
                              " data bytes, the file has " + std::to_string(data_bytes));

  NpyArray array{.shape = std::move(header.shape), .descr = header.descr, .values = {}};
  array.values.resize(static_cast<std::size_t>(count));
  const unsigned char* data = bytes.data() + data_start;
  for (std::size_t i = 0; i < array.values.size(); ++i) {
    if (element_bytes == 4) {
      std::uint32_t bits = 0;
      for (int b = 3; b >= 0; --b) bits = (bits << 8) | data[i * 4 + static_cast<std::size_t>(b)];
      array.values[i] = static_cast<double>(std::bit_cast<float>(bits));
    } else {
      std::uint64_t bits = 0;
      for (int b = 7; b >= 0; --b) bits = (bits << 8) | data[i * 8 + static_cast<std::size_t>(b)];
      array.values[i] = std::bit_cast<double>(bits);
    }
  }
  return array;
}

NpyArray read_npy_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_artefact(path, "cannot open the file");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (in.bad()) fail_artefact(path, "read error");
  return parse_npy(bytes, path);
}

NpyArray read_lukv_curve(const std::string& path) {
  NpyArray curve = read_npy_file(path);
  if (curve.shape.size() != 3 || curve.shape[0] != kLukvTargets || curve.shape[1] < 1 ||
      curve.shape[2] < 1)
    fail_artefact(path, "LU-KV budget curve has shape " + shape_text(curve.shape) +
                            " (want [99, layers, KV heads], layers and KV heads >= 1)");
  for (std::size_t i = 0; i < curve.values.size(); ++i)
    if (!std::isfinite(curve.values[i]))
      fail_artefact(path, "LU-KV budget curve value " + std::to_string(i) + " is not finite");
  return curve;
}

void check_lukv_curve_file(const std::string& path) {
  check_without_path_prefix(path, [&] { (void)read_lukv_curve(path); });
}

}  // namespace kvaudit::methods

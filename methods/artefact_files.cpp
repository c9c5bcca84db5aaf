// Artefact file readers (artefact_files.h).
#include "methods/artefact_files.h"

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace kvaudit::methods {
namespace {

using nlohmann::json;

}  // namespace

std::vector<unsigned char> read_artefact_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_artefact(path, "cannot open the file");
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  if (in.bad()) fail_artefact(path, "read error");
  return bytes;
}

namespace {

// IEEE half → f32, exact (subnormals, infinities and NaN included).
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0)
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal half: mantissa · 2^-24, exact in f32.
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign != 0 ? -magnitude : magnitude;
}

std::uint64_t element_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;  // other dtypes are parsed (their extent checked) but never read
}

// Bytes per element of every fixed-size safetensors dtype (for the extent check of tensors that
// are not read); 0 for an unknown or sub-byte dtype.
std::uint64_t any_element_size(const std::string& dtype) {
  static const std::map<std::string, std::uint64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},     {"C64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

struct TensorEntry {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct ParsedSafetensors {
  std::vector<unsigned char> bytes;
  std::uint64_t data_offset = 0;
  std::map<std::string, TensorEntry> tensors;
};

ParsedSafetensors parse_safetensors(std::vector<unsigned char> bytes, const std::string& path) {
  ParsedSafetensors file;
  file.bytes = std::move(bytes);
  const auto size = static_cast<std::uint64_t>(file.bytes.size());
  if (size < 8)
    fail_artefact(path, "not a safetensors file (shorter than its 8-byte header length)");
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i)
    header_length = (header_length << 8) | file.bytes[static_cast<std::size_t>(i)];
  if (header_length > size - 8)
    fail_artefact(path, "safetensors header length " + std::to_string(header_length) +
                            " exceeds the file size " + std::to_string(size));
  file.data_offset = 8 + header_length;
  const std::string header(reinterpret_cast<const char*>(file.bytes.data()) + 8,
                           static_cast<std::size_t>(header_length));
  // Duplicate keys at the top level would make a tensor ambiguous: the parser callback sees every
  // key, nlohmann itself keeps the last one silently.
  std::set<std::string> top_level_keys;
  std::string duplicate;
  const json::parser_callback_t watch = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1) {
      const auto key = parsed.get<std::string>();
      if (!top_level_keys.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(header, watch);
  } catch (const json::exception& e) {
    fail_artefact(path, std::string("safetensors header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty())
    fail_artefact(path, "safetensors header names tensor '" + duplicate + "' twice");
  if (!root.is_object()) fail_artefact(path, "safetensors header is not a JSON object");
  const std::uint64_t data_size = size - file.data_offset;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor '" + name + "'";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.at("dtype").is_string() ||
        !entry.contains("shape") || !entry.at("shape").is_array() ||
        !entry.contains("data_offsets") || !entry.at("data_offsets").is_array() ||
        entry.at("data_offsets").size() != 2)
      fail_artefact(
          path, where + ": needs dtype (string), shape (array) and data_offsets ([begin, end])");
    TensorEntry t;
    t.dtype = entry.at("dtype").get<std::string>();
    std::uint64_t count = 1;
    for (const auto& dim : entry.at("shape")) {
      if (!dim.is_number_unsigned())
        fail_artefact(path, where + ": shape entries must be integers >= 0");
      const auto n = dim.get<std::uint64_t>();
      if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          (n != 0 && count > std::numeric_limits<std::uint64_t>::max() / n))
        fail_artefact(path, where + ": shape overflows");
      count *= n;
      t.shape.push_back(static_cast<std::int64_t>(n));
    }
    for (const auto& offset : entry.at("data_offsets"))
      if (!offset.is_number_unsigned())
        fail_artefact(path, where + ": data_offsets must be integers >= 0");
    t.begin = entry.at("data_offsets")[0].get<std::uint64_t>();
    t.end = entry.at("data_offsets")[1].get<std::uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      fail_artefact(path, where + ": data_offsets [" + std::to_string(t.begin) + ", " +
                              std::to_string(t.end) + ") lie outside the data buffer of " +
                              std::to_string(data_size) + " bytes");
    const std::uint64_t element = any_element_size(t.dtype);
    if (element == 0)
      fail_artefact(path, where + ": unknown or unsupported dtype '" + t.dtype + "'");
    if (count > std::numeric_limits<std::uint64_t>::max() / element ||
        count * element != t.end - t.begin)
      fail_artefact(path, where + ": shape " + shape_text(t.shape) + " of " + t.dtype + " needs " +
                              std::to_string(count) + " x " + std::to_string(element) +
                              " bytes but data_offsets span " + std::to_string(t.end - t.begin));
    file.tensors.emplace(name, std::move(t));
  }
  return file;
}

std::vector<float> widen(const ParsedSafetensors& file, const TensorEntry& t,
                         const std::string& path, const std::string& name) {
  const std::uint64_t element = element_size(t.dtype);
  if (element == 0)
    fail_artefact(path,
                  "tensor '" + name + "' has dtype " + t.dtype + "; F32, F16 or BF16 is required");
  const unsigned char* data =
      file.bytes.data() + static_cast<std::size_t>(file.data_offset + t.begin);
  const auto count = static_cast<std::size_t>((t.end - t.begin) / element);
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned char* p = data + i * element;
    if (t.dtype == "F32") {
      const std::uint32_t bits =
          static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
          (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
      out[i] = std::bit_cast<float>(bits);
    } else {
      const auto bits16 = static_cast<std::uint16_t>(static_cast<unsigned>(p[0]) |
                                                     (static_cast<unsigned>(p[1]) << 8));
      out[i] = t.dtype == "BF16" ? std::bit_cast<float>(static_cast<std::uint32_t>(bits16) << 16)
                                 : half_to_float(bits16);
    }
    if (!std::isfinite(out[i]))
      fail_artefact(path, "tensor '" + name + "' holds a non-finite value at flat index " +
                              std::to_string(i));
  }
  return out;
}

void require_rank(const std::string& path, const std::string& name, const ArtefactTensor& t,
                  std::size_t rank, const std::string& layout) {
  if (t.shape.size() != rank)
    fail_artefact(path, "tensor '" + name + "' must be " + layout + ", not " + shape_text(t.shape));
  for (const auto n : t.shape)
    if (n < 1)
      fail_artefact(path, "tensor '" + name + "' has an empty dimension: " + shape_text(t.shape));
}

}  // namespace

[[noreturn]] void fail_artefact(const std::string& source, const std::string& what) {
  throw std::invalid_argument(source + ": " + what);
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::map<std::string, ArtefactTensor> read_safetensors_tensors(
    const std::string& path, const std::vector<std::string>& names) {
  return parse_safetensors_tensors(read_artefact_bytes(path), path, names);
}

std::map<std::string, ArtefactTensor> parse_safetensors_tensors(
    std::vector<unsigned char> bytes, const std::string& path,
    const std::vector<std::string>& names) {
  const ParsedSafetensors file = parse_safetensors(std::move(bytes), path);
  std::map<std::string, ArtefactTensor> out;
  for (const std::string& name : names) {
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      std::string present;
      for (const auto& [n, t] : file.tensors) present += (present.empty() ? "" : ", ") + n;
      fail_artefact(path, "has no tensor '" + name + "' (it holds: " +
                              (present.empty() ? std::string("none") : present) + ")");
    }
    out[name] = {it->second.shape, widen(file, it->second, path, name)};
  }
  return out;
}

std::vector<std::string> parse_safetensors_names(std::vector<unsigned char> bytes,
                                                 const std::string& source) {
  const ParsedSafetensors file = parse_safetensors(std::move(bytes), source);
  std::vector<std::string> names;
  for (const auto& [name, entry] : file.tensors) names.push_back(name);
  return names;
}

ArtefactMatrix read_tsv_matrix(const std::string& path) {
  const std::vector<unsigned char> bytes = read_artefact_bytes(path);
  return parse_tsv_matrix(std::string(bytes.begin(), bytes.end()), path);
}

ArtefactMatrix parse_tsv_matrix(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  ArtefactMatrix m;
  std::string line;
  std::int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<double> row;
    std::size_t pos = 0;
    while (pos < line.size()) {
      const std::size_t start = line.find_first_not_of(" \t", pos);
      if (start == std::string::npos) break;
      std::size_t stop = line.find_first_of(" \t", start);
      if (stop == std::string::npos) stop = line.size();
      const std::string field = line.substr(start, stop - start);
      char* end = nullptr;
      errno = 0;
      const double v = std::strtod(field.c_str(), &end);
      if (end != field.c_str() + field.size() || errno == ERANGE || !std::isfinite(v))
        fail_artefact(path, "line " + std::to_string(line_number) + ": '" + field +
                                "' is not a finite number");
      row.push_back(v);
      pos = stop;
    }
    if (m.rows == 0) {
      m.columns = static_cast<std::int64_t>(row.size());
    } else if (static_cast<std::int64_t>(row.size()) != m.columns) {
      fail_artefact(path, "line " + std::to_string(line_number) + " has " +
                              std::to_string(row.size()) + " values, the first row " +
                              std::to_string(m.columns));
    }
    m.values.insert(m.values.end(), row.begin(), row.end());
    ++m.rows;
  }
  if (m.rows == 0) fail_artefact(path, "holds no rows");
  return m;
}

void check_qfilter_file(const std::string& path) {
  check_without_path_prefix(path, [&] {
    const auto t = read_safetensors_tensors(path, {"q_filters"});
    require_rank(path, "q_filters", t.at("q_filters"), 3, "[layers, KV heads, head_dim]");
  });
}

void check_expected_attention_stats_file(const std::string& path) {
  check_without_path_prefix(path, [&] {
    const auto t = read_safetensors_tensors(path, {"query_mean", "query_cov"});
    const ArtefactTensor& mean = t.at("query_mean");
    const ArtefactTensor& cov = t.at("query_cov");
    require_rank(path, "query_mean", mean, 3, "[layers, heads, head_dim]");
    require_rank(path, "query_cov", cov, 4, "[layers, heads, head_dim, head_dim]");
    if (cov.shape[0] != mean.shape[0] || cov.shape[1] != mean.shape[1] ||
        cov.shape[2] != mean.shape[2] || cov.shape[3] != mean.shape[2])
      fail_artefact(path, "query_cov " + shape_text(cov.shape) + " does not match query_mean " +
                              shape_text(mean.shape) +
                              " (want [layers, heads, head_dim, head_dim])");
  });
}

void check_duo_attention_pattern_file(const std::string& path) {
  check_without_path_prefix(path, [&] { (void)read_tsv_matrix(path); });
}

}  // namespace kvaudit::methods

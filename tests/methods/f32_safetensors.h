// Test helper: writes small F32 safetensors files (the artefact formats of methods/) into a scratch
// directory, so reader tests build their inputs from named tensors.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace kvaudit::methods::testing {

struct F32Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

// <temp>/<directory>-<pid>/<name>, the directory created. Per process, because ctest runs some
// tests twice at once (plain and with the parser label), and both write the same names.
inline std::filesystem::path scratch_file(const std::string& directory, const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (directory + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

// Writes `tensors` (name order) as F32 little-endian into scratch_file(directory, name); returns
// the path.
inline std::string write_f32_safetensors(const std::string& directory, const std::string& name,
                                         const std::map<std::string, F32Tensor>& tensors) {
  std::string header = "{";
  std::vector<unsigned char> data;
  for (const auto& [tensor_name, t] : tensors) {
    std::string shape;
    for (std::size_t k = 0; k < t.shape.size(); ++k)
      shape += (k ? "," : "") + std::to_string(t.shape[k]);
    const std::size_t bytes = t.values.size() * 4;
    header += (header.size() > 1 ? "," : "") + std::string("\"") + tensor_name +
              "\":{\"dtype\":\"F32\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + bytes) + "]}";
    const std::size_t at = data.size();
    data.resize(at + bytes);
    std::memcpy(data.data() + at, t.values.data(), bytes);  // little-endian host
  }
  header += "}";
  const std::filesystem::path path = scratch_file(directory, name);
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path.string();
}

}  // namespace kvaudit::methods::testing

// Test helpers for the model-format tests: a little-endian byte writer to build GGUF and
// safetensors files byte by byte (so each malformed case is spelled out in the test), a per-test
// scratch directory, a file writer, SHA-256 of f32 data (to compare against
// tests/golden/formats/reference.json) and an error-message matcher.
#pragma once

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "runners/model/model_error.h"

namespace kvaudit::model::test {

inline std::filesystem::path golden_dir() { return KVAUDIT_FORMATS_GOLDEN_DIR; }

// A fresh, empty directory for the running test: <tmp>/<suite>.<test>.
inline std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(KVAUDIT_FORMATS_TEST_TMP) /
                                    (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::filesystem::path write_file(const std::filesystem::path& path,
                                        const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return path;
}

inline std::filesystem::path write_text(const std::filesystem::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return path;
}

// Little-endian byte builder.
class Bytes {
 public:
  Bytes& u8(std::uint8_t v) { return put(v); }
  Bytes& u32(std::uint32_t v) { return put(v); }
  Bytes& i32(std::int32_t v) { return put(v); }
  Bytes& u64(std::uint64_t v) { return put(v); }
  Bytes& f32(float v) { return put(v); }
  Bytes& raw(std::string_view text) {
    bytes_.insert(bytes_.end(), text.begin(), text.end());
    return *this;
  }
  Bytes& raw(const std::vector<std::uint8_t>& data) {
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return *this;
  }
  // A GGUF string: u64 length + bytes.
  Bytes& str(std::string_view text) { return u64(text.size()).raw(text); }
  Bytes& zeros(std::size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  Bytes& pad_to(std::size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
    return *this;
  }
  std::size_t size() const { return bytes_.size(); }
  const std::vector<std::uint8_t>& data() const { return bytes_; }

 private:
  template <typename T>
  Bytes& put(T v) {
    std::uint8_t buffer[sizeof(T)];
    std::memcpy(buffer, &v, sizeof(T));
    bytes_.insert(bytes_.end(), buffer, buffer + sizeof(T));
    return *this;
  }
  std::vector<std::uint8_t> bytes_;
};

// GGUF value type codes and ggml type codes used by the tests.
enum : std::uint32_t { kU8 = 0, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };
enum : std::uint32_t { kGgmlF32 = 0, kGgmlQ8_0 = 8 };

// GGUF header: magic, version, tensor_count, kv_count.
inline Bytes gguf_header(std::uint32_t version, std::uint64_t tensors, std::uint64_t kvs) {
  Bytes b;
  b.raw("GGUF").u32(version).u64(tensors).u64(kvs);
  return b;
}

// A safetensors file: 8-byte header length, the header text, the data buffer.
inline std::vector<std::uint8_t> safetensors_bytes(std::string_view header,
                                                   const std::vector<std::uint8_t>& buffer) {
  Bytes b;
  b.u64(header.size()).raw(header).raw(buffer);
  return b.data();
}

// SHA-256 (hex) of f32 values as little-endian bytes; matches tools/golden/make_format_golden.py.
inline std::string sha256_f32(const std::vector<float>& values) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(values.data(), values.size() * sizeof(float), digest, &length, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < length; ++i) {
    text += hex[digest[i] >> 4];
    text += hex[digest[i] & 15];
  }
  return text;
}

// Runs `action`, expects a ModelInputError whose message contains every one of `parts`.
inline void expect_model_error(const std::function<void()>& action,
                               std::initializer_list<std::string> parts) {
  try {
    action();
    ADD_FAILURE() << "expected a ModelInputError, but nothing was thrown";
  } catch (const ModelInputError& e) {
    const std::string message = e.what();
    for (const auto& part : parts)
      EXPECT_NE(message.find(part), std::string::npos)
          << "message does not contain '" << part << "':\n  " << message;
  }
}

}  // namespace kvaudit::model::test

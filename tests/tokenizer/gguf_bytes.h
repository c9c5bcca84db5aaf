// GgufBytes: writes a metadata-only GGUF v3 file in memory (header, key/value pairs, no tensors)
// for the GGUF tokenizer tests. Layout per ggml docs/gguf.md: "GGUF", version u32, tensor count
// u64, kv count u64, then each key (u64 length + bytes), value type u32 and value.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvaudit::model::testing_gguf {

class GgufBytes {
 public:
  GgufBytes& string(const std::string& key, const std::string& value) {
    start(key, kString);
    put_string(value);
    return *this;
  }
  GgufBytes& boolean(const std::string& key, bool value) {
    start(key, kBool);
    body_.push_back(value ? 1 : 0);
    return *this;
  }
  GgufBytes& u32(const std::string& key, std::uint32_t value) {
    start(key, kU32);
    put(value);
    return *this;
  }
  GgufBytes& strings(const std::string& key, const std::vector<std::string>& values) {
    start(key, kArray);
    put(kString);
    put(static_cast<std::uint64_t>(values.size()));
    for (const std::string& v : values) put_string(v);
    return *this;
  }
  GgufBytes& i32s(const std::string& key, const std::vector<std::int32_t>& values) {
    start(key, kArray);
    put(kI32);
    put(static_cast<std::uint64_t>(values.size()));
    for (const std::int32_t v : values) put(v);
    return *this;
  }

  std::vector<std::uint8_t> bytes() const {
    std::vector<std::uint8_t> out = {'G', 'G', 'U', 'F'};
    const auto append = [&](auto value) {
      std::uint8_t raw[sizeof(value)];
      std::memcpy(raw, &value, sizeof(value));
      out.insert(out.end(), raw, raw + sizeof(value));
    };
    append(std::uint32_t{3});
    append(std::uint64_t{0});
    append(count_);
    out.insert(out.end(), body_.begin(), body_.end());
    return out;
  }

 private:
  static constexpr std::uint32_t kU32 = 4;
  static constexpr std::uint32_t kI32 = 5;
  static constexpr std::uint32_t kBool = 7;
  static constexpr std::uint32_t kString = 8;
  static constexpr std::uint32_t kArray = 9;

  template <typename T>
  void put(T value) {
    std::uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    body_.insert(body_.end(), raw, raw + sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<std::uint64_t>(s.size()));
    body_.insert(body_.end(), s.begin(), s.end());
  }
  void start(const std::string& key, std::uint32_t type) {
    put_string(key);
    put(type);
    ++count_;
  }

  std::vector<std::uint8_t> body_;
  std::uint64_t count_ = 0;
};

}  // namespace kvaudit::model::testing_gguf

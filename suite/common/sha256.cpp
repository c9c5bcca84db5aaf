#include "suite/common/sha256.h"

#include <openssl/evp.h>

#include <cstdio>
#include <memory>

#include "base/errors.h"

namespace kvaudit {

Sha256Digest sha256(std::string_view bytes) {
  Sha256Digest out{};
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != out.size()) {
    throw InternalError("OpenSSL EVP_Digest(SHA-256) failed");
  }
  return out;
}

std::string to_hex(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (std::uint8_t b : digest) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string sha256_hex(std::string_view bytes) { return to_hex(sha256(bytes)); }

std::uint64_t digest_prefix_u64(const Sha256Digest& digest) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | digest[static_cast<std::size_t>(i)];
  return v;
}

std::string id_hex(std::uint64_t id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(id));
  return buf;
}

}  // namespace kvaudit

// SHA-256 through OpenSSL's libcrypto (EVP interface).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvaudit {

using Sha256Digest = std::array<std::uint8_t, 32>;

Sha256Digest sha256(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);
std::string to_hex(const Sha256Digest& digest);
// The first 8 bytes of the digest, big-endian: the numeric form of a 16-hex-digit id.
std::uint64_t digest_prefix_u64(const Sha256Digest& digest);
// 16 lowercase hex digits of a 64-bit id (the string form used in docs and tables).
std::string id_hex(std::uint64_t id);

}  // namespace kvaudit

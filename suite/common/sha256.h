// SHA-256 through OpenSSL's libcrypto (EVP interface).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvaudit {

using Sha256Digest = std::array<std::uint8_t, 32>;

Sha256Digest sha256(std::string_view bytes);
std::string sha256_hex(std::string_view bytes);
// SHA-256 of a file's bytes, read in 1 MiB blocks (constant memory for any size); the number of
// bytes hashed goes to *bytes_read when given. InputError naming the file when it cannot be opened
// or read (missing, a directory, permissions); InternalError when OpenSSL fails.
Sha256Digest sha256_file(const std::filesystem::path& file, std::uint64_t* bytes_read = nullptr);
std::string to_hex(const Sha256Digest& digest);
// The first 8 bytes of the digest, big-endian: the numeric form of a 16-hex-digit id.
std::uint64_t digest_prefix_u64(const Sha256Digest& digest);
// 16 lowercase hex digits of a 64-bit id (the string form used in docs and tables).
std::string id_hex(std::uint64_t id);

}  // namespace kvaudit

#include "suite/common/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

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

Sha256Digest sha256_file(const std::filesystem::path& file, std::uint64_t* bytes_read) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) {
    throw InputError(file.string() + ": is a directory, expected a file");
  }
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> in(std::fopen(file.c_str(), "rb"),
                                                           &std::fclose);
  if (!in) throw InputError(file.string() + ": cannot open (" + std::strerror(errno) + ")");
  const std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw InternalError("OpenSSL EVP_DigestInit_ex(SHA-256) failed");
  }
  std::uint64_t total = 0;
  std::vector<unsigned char> block(std::size_t{1} << 20);
  for (;;) {
    const std::size_t n = std::fread(block.data(), 1, block.size(), in.get());
    if (n > 0) {
      if (EVP_DigestUpdate(ctx.get(), block.data(), n) != 1) {
        throw InternalError("OpenSSL EVP_DigestUpdate(SHA-256) failed");
      }
      total += n;
    }
    if (n < block.size()) {
      if (std::ferror(in.get())) {
        throw InputError(file.string() + ": read error after " + std::to_string(total) +
                         " bytes (" + std::strerror(errno) + ")");
      }
      break;
    }
  }
  Sha256Digest out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), out.data(), &len) != 1 || len != out.size()) {
    throw InternalError("OpenSSL EVP_DigestFinal_ex(SHA-256) failed");
  }
  if (bytes_read != nullptr) *bytes_read = total;
  return out;
}

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

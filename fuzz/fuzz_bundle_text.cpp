// Fuzz target: the text files `kvaudit verify` reads from a bundle or a user — SHA256SUMS
// (artifacts/sha256_sums.h parse_sums), the report's CSV tables (csv_table.h parse_csv) and claims
// files (claims.h parse_claims). The first byte chooses the parser, the rest is the text. Any input
// must either parse or raise InputError naming the file; anything else is a bug.
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "suite/artifacts/claims.h"
#include "suite/artifacts/csv_table.h"
#include "suite/artifacts/sha256_sums.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        kvaudit::artifacts::parse_sums(text, "fuzz/SHA256SUMS");
        break;
      case 1:
        kvaudit::artifacts::parse_csv(text, "fuzz/table.csv");
        break;
      default:
        kvaudit::artifacts::parse_claims(text, "fuzz/claims.csv");
        break;
    }
  } catch (const kvaudit::InputError&) {
  }
  return 0;
}

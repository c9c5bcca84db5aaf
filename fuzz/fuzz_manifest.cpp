// Fuzz target: the TOML manifest parser, validator, canonicalizer and expansion. Any input must
// either parse or raise ManifestError; anything else (crash, other exception, sanitizer report)
// is a bug. Expansion is bounded so that a valid but huge grid does not time out the fuzzer.
#include <cstdint>
#include <string_view>

#include "suite/manifest/canonical.h"
#include "suite/manifest/diagnostics.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto m = kvaudit::manifest::parse_manifest(text, "fuzz.toml");
    (void)kvaudit::manifest::manifest_sha256(m);
    if (kvaudit::manifest::estimated_cells(m) <= 20000) (void)kvaudit::manifest::expand(m);
  } catch (const kvaudit::manifest::ManifestError&) {
  }
  return 0;
}

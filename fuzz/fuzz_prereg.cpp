// Fuzz target: the preregistration lock (prereg.json) as run, reduce and plan read it — JSON
// parsing, then the whole-lock verification (every field typed, the canonical manifest hashing to
// manifest_sha256). Any input must either pass or raise InputError naming the file; anything else
// (crash, other exception, sanitizer report) is a bug.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/errors.h"
#include "suite/manifest/prereg_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json lock = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (lock.is_discarded()) return 0;  // load_prereg refuses non-JSON before verification
  try {
    kvaudit::manifest::verify_prereg(lock, "fuzz/prereg.json");
  } catch (const kvaudit::InputError&) {
  }
  return 0;
}

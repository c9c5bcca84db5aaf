// Fuzz target: the artefact readers of methods/artefact_files.h (the files QFilter,
// ExpectedAttentionStats and DuoAttention take from the manifest) on arbitrary bytes: as a
// safetensors file asked for each artefact tensor, and as a TSV pattern. Any input must either
// parse or raise std::invalid_argument; anything else (crash, other exception, sanitizer report)
// is a bug.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/artefact_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvaudit::methods;
  const std::vector<unsigned char> bytes(data, data + size);
  for (const char* name : {"q_filters", "query_mean", "query_cov"}) {
    try {
      (void)parse_safetensors_tensors(bytes, "fuzz", {name});
    } catch (const std::invalid_argument&) {
    }
  }
  try {
    (void)parse_tsv_matrix(std::string(bytes.begin(), bytes.end()), "fuzz");
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

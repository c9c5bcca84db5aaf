// Fuzz target: the readers of the files and lists method parameters name, on arbitrary bytes —
// methods/artefact_files.h (QFilter, ExpectedAttentionStats, DuoAttention: a safetensors file asked
// for each artefact tensor, a TSV pattern), methods/fastkvzip_gates.h (FastKVzip's per-layer gates
// in one safetensors file), methods/kvzap_model.h (KVzap's per-layer surrogate; also the
// safetensors name listing), methods/head_scores_file.h (HeadKV's JSON) and
// methods/param_lists.h (list parameters' canonical text). Any input must either parse or raise
// std::invalid_argument (a list parses or gives nullopt); anything else (crash, other exception,
// sanitizer report) is a bug.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/artefact_files.h"
#include "methods/fastkvzip_gates.h"
#include "methods/head_scores_file.h"
#include "methods/kvzap_model.h"
#include "methods/param_lists.h"

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
    (void)parse_fastkvzip_gates(bytes, "fuzz");
  } catch (const std::invalid_argument&) {
  }
  try {
    (void)parse_kvzap_model(bytes, "fuzz");
  } catch (const std::invalid_argument&) {
  }
  const std::string text(bytes.begin(), bytes.end());
  try {
    (void)parse_tsv_matrix(text, "fuzz");
  } catch (const std::invalid_argument&) {
  }
  try {
    (void)parse_head_scores(text);
  } catch (const std::invalid_argument&) {
  }
  (void)parse_real_list(text);
  (void)split_name_list(text);
  return 0;
}

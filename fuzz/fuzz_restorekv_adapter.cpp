// Fuzz target: RestoreKV's artefact readers (methods/restorekv_artefacts.h) on arbitrary bytes.
// The input is split in two: its first 4 bytes are the little-endian length of the
// adapter_config.json text that follows (clamped to what is there), the rest is
// adapter_model.safetensors; parse_lora_adapter reads the pair, and parse_restore_embeddings reads
// the safetensors part and the whole input. Any input must either parse or raise
// std::invalid_argument; anything else (crash, other exception, sanitizer report) is a bug. A
// parsed adapter must hold rank x in_features A and out_features x rank B values per module, and
// parsed embeddings tokens x hidden values.
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "methods/restorekv_artefacts.h"

namespace {

void embeddings(const std::vector<unsigned char>& bytes) {
  using namespace kvaudit::methods;
  try {
    int tokens = 0;
    int hidden = 0;
    const std::vector<float> e = parse_restore_embeddings(bytes, "fuzz", &tokens, &hidden);
    if (tokens < 1 || hidden < 1 ||
        e.size() != static_cast<std::size_t>(tokens) * static_cast<std::size_t>(hidden))
      std::abort();
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvaudit::methods;
  std::size_t json_size = 0;
  std::size_t start = 0;
  if (size >= 4) {
    json_size = static_cast<std::size_t>(data[0]) | (static_cast<std::size_t>(data[1]) << 8) |
                (static_cast<std::size_t>(data[2]) << 16) |
                (static_cast<std::size_t>(data[3]) << 24);
    start = 4;
    if (json_size > size - start) json_size = size - start;
  }
  const std::string_view config(reinterpret_cast<const char*>(data) + start, json_size);
  const std::vector<unsigned char> weights(data + start + json_size, data + size);
  try {
    const LoraAdapter adapter = parse_lora_adapter(config, weights, "fuzz");
    if (adapter.rank < 1 || adapter.layers.empty()) std::abort();
    for (const auto& layer : adapter.layers) {
      if (layer.empty()) std::abort();
      for (const auto& [target, m] : layer) {
        const auto r = static_cast<std::size_t>(adapter.rank);
        if (m.in_features < 1 || m.out_features < 1 ||
            m.a.size() != r * static_cast<std::size_t>(m.in_features) ||
            m.b.size() != static_cast<std::size_t>(m.out_features) * r ||
            lora_target_name(target).empty())
          std::abort();
      }
    }
  } catch (const std::invalid_argument&) {
  }
  embeddings(weights);
  embeddings(std::vector<unsigned char>(data, data + size));
  return 0;
}

// Fuzz target: the GGUF parser (runners/model/formats/gguf.h) on arbitrary bytes; then, for what
// parses, the typed metadata accessors, config_from_gguf, and dequantization of every tensor of a
// supported type (F32, F16, BF16, Q8_0, Q4_0, Q4_1). Any input must either work or raise
// ModelInputError; anything else (crash, other exception, sanitizer report) is a bug.
#include <cstdint>
#include <span>

#include "runners/model/formats/dequantize.h"
#include "runners/model/formats/gguf.h"
#include "runners/model/formats/gguf_config.h"
#include "runners/model/model_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvaudit::model;
  try {
    const auto file = GgufFile::parse(std::span<const std::uint8_t>(data, size), "fuzz.gguf");
    for (const auto& key : file.keys()) {
      const GgufValue& value = file.get(key);
      (void)value.type_description();
      try {
        if (value.type == GgufValueType::array) {
          (void)file.array_size(key);
          (void)file.get_integer_array(key);
        } else {
          (void)file.get_integer(key);
        }
      } catch (const ModelInputError&) {
      }
    }
    for (const auto& tensor : file.tensors()) {
      (void)tensor.torch_shape();
      if (dequantize_supported(tensor.type)) (void)file.tensor_to_f32(tensor.name);
    }
    (void)config_from_gguf(file);
  } catch (const ModelInputError&) {
  }
  return 0;
}

// Fuzz target: the safetensors header parser and validator (runners/model/formats/safetensors.h)
// on arbitrary bytes, then the f32 conversion of every F32/F16/BF16 tensor that parsed. Any input
// must either parse or raise ModelInputError; anything else (crash, other exception, sanitizer
// report) is a bug.
#include <cstdint>
#include <span>

#include "runners/model/formats/safetensors.h"
#include "runners/model/model_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kvaudit::model;
  try {
    const auto file = SafetensorsFile::parse(std::span<const std::uint8_t>(data, size), "fuzz");
    for (const auto& name : file.names()) {
      const auto& info = file.info(name);
      (void)file.raw(name);
      if (info.dtype == SafetensorsDtype::F32 || info.dtype == SafetensorsDtype::F16 ||
          info.dtype == SafetensorsDtype::BF16)
        (void)file.to_f32(name);
    }
  } catch (const ModelInputError&) {
  }
  return 0;
}

// Table of ggml tensor types: name, elements per block and bytes per block (ggml `src/ggml.c`
// type_traits; gguf-py `GGML_QUANT_SIZES` agrees except for Q8_1, where ggml's block_q8_1 is
// 2 x f16 + 32 x i8 = 36 bytes).
#include "runners/model/formats/ggml_types.h"

#include <array>

namespace kvaudit::model {

namespace {

struct Entry {
  std::uint32_t code;
  GgmlTypeTraits traits;
};

constexpr std::array kTypes{
    Entry{0, {"F32", 1, 4}},         Entry{1, {"F16", 1, 2}},
    Entry{2, {"Q4_0", 32, 18}},      Entry{3, {"Q4_1", 32, 20}},
    Entry{6, {"Q5_0", 32, 22}},      Entry{7, {"Q5_1", 32, 24}},
    Entry{8, {"Q8_0", 32, 34}},      Entry{9, {"Q8_1", 32, 36}},
    Entry{10, {"Q2_K", 256, 84}},    Entry{11, {"Q3_K", 256, 110}},
    Entry{12, {"Q4_K", 256, 144}},   Entry{13, {"Q5_K", 256, 176}},
    Entry{14, {"Q6_K", 256, 210}},   Entry{15, {"Q8_K", 256, 292}},
    Entry{16, {"IQ2_XXS", 256, 66}}, Entry{17, {"IQ2_XS", 256, 74}},
    Entry{18, {"IQ3_XXS", 256, 98}}, Entry{19, {"IQ1_S", 256, 50}},
    Entry{20, {"IQ4_NL", 32, 18}},   Entry{21, {"IQ3_S", 256, 110}},
    Entry{22, {"IQ2_S", 256, 82}},   Entry{23, {"IQ4_XS", 256, 136}},
    Entry{24, {"I8", 1, 1}},         Entry{25, {"I16", 1, 2}},
    Entry{26, {"I32", 1, 4}},        Entry{27, {"I64", 1, 8}},
    Entry{28, {"F64", 1, 8}},        Entry{29, {"IQ1_M", 256, 56}},
    Entry{30, {"BF16", 1, 2}},       Entry{34, {"TQ1_0", 256, 54}},
    Entry{35, {"TQ2_0", 256, 66}},   Entry{39, {"MXFP4", 32, 17}},
    Entry{40, {"NVFP4", 64, 36}},    Entry{41, {"Q1_0", 128, 18}},
};

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(std::uint32_t code) {
  for (const auto& entry : kTypes)
    if (entry.code == code) return entry.traits;
  return std::nullopt;
}

GgmlTypeTraits ggml_type_traits(GgmlType type) {
  const auto traits = ggml_type_traits(static_cast<std::uint32_t>(type));
  return traits ? *traits : GgmlTypeTraits{"unknown", 1, 0};
}

std::string ggml_type_name(GgmlType type) {
  const auto code = static_cast<std::uint32_t>(type);
  const auto traits = ggml_type_traits(code);
  return traits ? std::string(traits->name) : "unknown(" + std::to_string(code) + ")";
}

}  // namespace kvaudit::model

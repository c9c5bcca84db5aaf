// AttentionBackend: the attention numerics a unit is computed with — `eager` (HF's materialized
// softmax with its bf16 rounding points) or `sdpa` (a flash-style online softmax). One enum for
// the manifest, the records, both devices and the reports; "attention backend" always means this,
// never the device (base/device.h).
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "base/enum_spelling.h"

namespace kvaudit {

// Values are in name order: they index per-backend tables (manifest expansion, reduce).
enum class AttentionBackend : unsigned char { eager = 0, sdpa = 1 };

inline constexpr std::array<EnumSpelling<AttentionBackend>, 2> kAttentionBackendSpellings{
    {EnumSpelling<AttentionBackend>{AttentionBackend::eager, "eager"},
     EnumSpelling<AttentionBackend>{AttentionBackend::sdpa, "sdpa"}}};

constexpr std::string_view attention_backend_name(AttentionBackend value) {
  return spelling_of(kAttentionBackendSpellings, value);
}
constexpr std::optional<AttentionBackend> parse_attention_backend(std::string_view name) {
  return parse_spelling(kAttentionBackendSpellings, name);
}

}  // namespace kvaudit

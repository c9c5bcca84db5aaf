// Device: where an inference engine computes — `cpu` (the reference backend, runners/cpu) or
// `cuda` (one NVIDIA GPU, runners/cuda). "device" always means this, never the attention backend
// (base/attention_backend.h).
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "base/enum_spelling.h"

namespace kvaudit {

enum class Device : unsigned char { cpu = 0, cuda = 1 };

inline constexpr std::array<EnumSpelling<Device>, 2> kDeviceSpellings{
    {EnumSpelling<Device>{Device::cpu, "cpu"}, EnumSpelling<Device>{Device::cuda, "cuda"}}};

constexpr std::string_view device_name(Device value) {
  return spelling_of(kDeviceSpellings, value);
}
constexpr std::optional<Device> parse_device(std::string_view name) {
  return parse_spelling(kDeviceSpellings, name);
}

}  // namespace kvaudit

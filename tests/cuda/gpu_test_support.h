// GPU test support: tests that need a CUDA device call KVAUDIT_REQUIRE_GPU() first; without a
// usable device they are skipped with the reason printed (never silently), so CPU-only CI stays
// green while every GPU test still compiles and links.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "runners/cuda/device_probe.h"

namespace kvaudit::cuda::test {

// Whether a CUDA device can be used; otherwise `reason` says why (no device, no driver, ...).
inline bool gpu_available(std::string& reason) {
  static const DeviceProbe probe = probe_devices();
  if (!probe.devices.empty()) return true;
  reason = probe.unavailable_reason.empty() ? "no CUDA device" : probe.unavailable_reason;
  return false;
}

}  // namespace kvaudit::cuda::test

#define KVAUDIT_REQUIRE_GPU()                                                 \
  do {                                                                        \
    std::string kvaudit_gpu_reason;                                           \
    if (!::kvaudit::cuda::test::gpu_available(kvaudit_gpu_reason)) {          \
      GTEST_SKIP() << "needs a CUDA GPU, none usable here: " << kvaudit_gpu_reason; \
    }                                                                         \
  } while (0)

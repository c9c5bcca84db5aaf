// The device probe of a build configured without nvcc: no CUDA device can be used, and says why.
#include <stdexcept>
#include <string>

#include "runners/cuda/device_probe.h"

namespace kvaudit::cuda {

DeviceProbe probe_devices() {
  DeviceProbe p;
  p.unavailable_reason =
      "this kvaudit was built without CUDA (nvcc not found, or -DKVAUDIT_ENABLE_CUDA=OFF)";
  return p;
}

void use_device(int index) {
  throw std::runtime_error("cannot use CUDA device " + std::to_string(index) +
                           ": this kvaudit was built without CUDA");
}

}  // namespace kvaudit::cuda

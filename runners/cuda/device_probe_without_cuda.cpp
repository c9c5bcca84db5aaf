// The device probe of a build configured without nvcc: no CUDA device can be used, and says why.
#include "runners/cuda/device_probe.h"

namespace kvaudit::cuda {

DeviceProbe probe_devices() {
  DeviceProbe p;
  p.unavailable_reason = "this kvaudit was built without CUDA (nvcc not found at configure time)";
  return p;
}

}  // namespace kvaudit::cuda

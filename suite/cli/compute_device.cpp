// Device choice for `kvaudit run`; see compute_device.h.
#include "suite/cli/compute_device.h"

#include "base/errors.h"
#include "runners/cuda/device_probe.h"
#include "suite/run/cuda_engine.h"

namespace kvaudit::cli {

ComputeDevice choose_compute_device(const std::string& request, int local_rank) {
  if (request != "auto" && request != "cpu" && request != "cuda") {
    throw InputError("--device: '" + request + "' is not one of auto, cpu, cuda");
  }
  ComputeDevice device;
  if (request == "cpu") {
    device.description = "device cpu (--device cpu)";
    return device;
  }
  if (!run::cuda_engine_built()) {
    if (request == "cuda") {
      throw InputError(
          "--device cuda: this kvaudit was built without the CUDA engine (nvcc not found, or "
          "-DKVAUDIT_ENABLE_CUDA=OFF); `kvaudit version` says which");
    }
    device.description = "device cpu (this kvaudit has no CUDA engine)";
    return device;
  }
  const cuda::DeviceProbe probe = cuda::probe_devices();
  if (probe.devices.empty()) {
    if (request == "cuda") {
      throw InputError("--device cuda: no usable CUDA device: " + probe.unavailable_reason);
    }
    device.description = "device cpu (no GPU: " + probe.unavailable_reason + ")";
    return device;
  }
  const auto& chosen = probe.devices[static_cast<std::size_t>(local_rank) % probe.devices.size()];
  cuda::use_device(chosen.index);
  device.gpu = true;
  device.index = chosen.index;
  device.name = chosen.name;
  device.uuid = chosen.uuid;
  device.driver_version = cuda::cuda_version_text(probe.driver_version);
  device.runtime_version = cuda::cuda_version_text(probe.runtime_version);
  device.description = "device cuda " + std::to_string(chosen.index) + " (" + chosen.name + ", " +
                       chosen.uuid + "; bf16 models on the GPU, f32 models on the CPU)";
  return device;
}

void record_compute_device(const ComputeDevice& device, records::ShardProvenance& provenance) {
  if (!device.gpu) return;
  provenance.gpu_name = device.name;
  provenance.gpu_uuid = device.uuid;
  provenance.driver_version = device.driver_version;
  provenance.cuda_runtime_version = device.runtime_version;
}

}  // namespace kvaudit::cli

// What CUDA devices this process can use: runtime and driver versions, devices with name, UUID,
// PCI bus id, memory and compute capability. Goes into `kvaudit version` and records' provenance.
// Never throws: a machine without a GPU or driver is described, not an error.
#pragma once

#include <string>
#include <vector>

namespace kvaudit::cuda {

struct DeviceDescription {
  int index = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  std::size_t total_memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

struct DeviceProbe {
  bool built_with_cuda = false;
  int runtime_version = 0;  // e.g. 13000 for CUDA 13.0
  int driver_version = 0;   // 0 when no driver is installed
  std::vector<DeviceDescription> devices;
  std::string unavailable_reason;  // why no device can be used ("" when at least one can)
};

DeviceProbe probe_devices();

// Makes device `index` the calling thread's current device (cudaSetDevice). Throws
// std::runtime_error naming the index and the reason when it cannot (no such device, or a build
// without CUDA).
void use_device(int index);

// "13.0" from 13000; "none" for 0.
inline std::string cuda_version_text(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace kvaudit::cuda

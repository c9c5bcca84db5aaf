// Device probe through the CUDA runtime API (no kernels: nothing here needs a CPU twin).
#include <cuda_runtime.h>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "runners/cuda/device_probe.h"

namespace kvaudit::cuda {

namespace {

std::string uuid_text(const cudaUUID_t& u) {
  char buf[64];
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

}  // namespace

DeviceProbe probe_devices() {
  DeviceProbe p;
  p.built_with_cuda = true;
  cudaRuntimeGetVersion(&p.runtime_version);
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    p.unavailable_reason = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    cudaGetLastError();  // clear the (non-sticky) error
    return p;
  }
  if (count == 0) {
    p.unavailable_reason = "no CUDA device visible";
    return p;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceDescription d;
    d.index = i;
    d.name = prop.name;
    d.uuid = uuid_text(prop.uuid);
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, i) == cudaSuccess) d.pci_bus_id = bus;
    d.total_memory_bytes = prop.totalGlobalMem;
    d.compute_major = prop.major;
    d.compute_minor = prop.minor;
    p.devices.push_back(d);
  }
  return p;
}

void use_device(int index) {
  const cudaError_t err = cudaSetDevice(index);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("cannot use CUDA device " + std::to_string(index) + ": " +
                             cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  }
}

}  // namespace kvaudit::cuda

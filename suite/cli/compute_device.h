// Which device a `kvaudit run` rank computes on (--device auto|cpu|cuda): one rank per GPU, the
// node-local rank picking the device (local rank mod visible devices; with Slurm's
// --gpus-per-task=1 each rank sees one device, index 0). `auto` uses a GPU when this build has
// CUDA and one is visible, else the CPU; `cuda` requires one. The choice goes into the shards'
// provenance (GPU name, UUID, driver and runtime versions).
#pragma once

#include <string>

#include "suite/records/provenance.h"

namespace kvaudit::cli {

struct ComputeDevice {
  bool gpu = false;
  int index = -1;           // CUDA device index when gpu
  std::string description;  // "CUDA device 0 (NVIDIA H200, GPU-…)" or "CPU (…why…)"
  std::string name, uuid, driver_version, runtime_version;
};

// Throws kvaudit::InputError for an unknown request, or `cuda` without a usable device (saying
// why); makes the chosen GPU the current device.
ComputeDevice choose_compute_device(const std::string& request, int local_rank);

// Copies the device facts into a shard's provenance.
void record_compute_device(const ComputeDevice& device, records::ShardProvenance& provenance);

}  // namespace kvaudit::cli

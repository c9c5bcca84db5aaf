// Shard provenance: where, how and from what a shard was written. Stored as root attributes of
// every shard (scalar variable-length UTF-8 strings, int64/uint64 integers) so that the reducer can
// reject mixed manifests and report heterogeneous builds, hosts and GPUs.
//
// fill_process_provenance() fills what this process can know by itself (build, HDF5, host, Slurm
// environment, CUDA_VISIBLE_DEVICES); the caller fills the manifest, rank, MPI and GPU parts, the
// seed and the attempt. The shard writer sets t_open_utc / t_close_utc.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "suite/records/schema_version.h"

namespace kvaudit::records {

struct ShardProvenance {
  // The shard's schema version (schema_version.h): kSchemaVersion when written by this build.
  int schema_version = static_cast<int>(kSchemaVersion);
  // The preregistered manifest (caller).
  std::string manifest_sha256;  // 64 lowercase hex digits of the canonical manifest
  std::string manifest_path;
  std::uint64_t n_cells_manifest = 0;
  std::string study_name;
  // This binary (kvaudit::build_info()).
  std::string tool_version;
  std::string git_commit;
  std::string git_dirty;  // "true", "false" or "unknown"
  std::string build_type;
  std::string compiler;
  std::string cxx_flags;
  // Libraries.
  std::string hdf5_version;         // H5get_libversion
  std::string mpi_library_version;  // MPI_Get_library_version (caller)
  // Host and placement.
  std::string hostname;
  int rank = 0;  // caller
  int world_size = 1;
  int local_rank = 0;
  std::string cuda_visible_devices;  // environment; "" if unset
  std::string gpu_name;              // caller; "" without a GPU
  std::string gpu_uuid;
  std::string driver_version;
  std::string cuda_runtime_version;
  // Slurm (environment; "" if absent).
  std::string slurm_job_id;
  std::string slurm_step_id;
  std::string slurm_array_task_id;
  std::string slurm_restart_count;
  std::string slurm_job_nodelist;
  // Randomness and attempt (caller).
  std::uint64_t global_seed = 0;
  std::string rng = "philox4x32-10";
  int attempt = 1;
  // ISO 8601 UTC with a trailing Z; t_close_utc is "" until the shard is closed.
  std::string t_open_utc;
  std::string t_close_utc;
  // Schema version 3 on (absent, so "", in older shards):
  std::string launch_id;      // the launch's random id, also in the file name (shard_name.h)
  std::string salvaged_from;  // a salvage shard: the .tmp file names it republished, one per line
  // Schema version 4 on (absent, so "", in older shards): what the CPU backend's numbers depend
  // on, so a re-run elsewhere can tell a kernel change from a discrepancy.
  std::string cpu_model;  // /proc/cpuinfo "model name" of the first CPU ("" when unknown)
  // caller: the CPU engine's evaluation order and level (cpu::cpu_kernel_provenance(), e.g.
  // "kvaudit-canonical-1 (avx2)"); records before it: the OpenBLAS core name
  std::string blas_core;
};

// "model name" of the first processor in /proc/cpuinfo ("" when unknown).
std::string cpu_model_name();

// Fills build info, hdf5_version, hostname, cpu_model, cuda_visible_devices and the slurm_*
// fields.
void fill_process_provenance(ShardProvenance& provenance);

// Writes every field as a root attribute of the open file `file_id` (strings repaired to valid
// UTF-8 as in utf8_text.h); throws InternalError naming `file` on failure.
void write_provenance(hid_t file_id, const ShardProvenance& provenance, const std::string& file);

// Reads the provenance attributes; throws InputError naming `file` when one is missing or of the
// wrong type, or when schema_version is outside [kOldestReadableSchemaVersion, kSchemaVersion].
ShardProvenance read_provenance(hid_t file_id, const std::string& file);

// (attribute name, value as text) for every field, in declaration order: for printing.
std::vector<std::pair<std::string, std::string>> provenance_items(
    const ShardProvenance& provenance);

}  // namespace kvaudit::records

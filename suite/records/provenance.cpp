// Provenance attributes: one table of fields drives filling, writing, reading and printing.
#include "suite/records/provenance.h"

#include <unistd.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <variant>

#include "base/errors.h"
#include "suite/common/build_info.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/hdf5_handle.h"
#include "suite/records/utf8_text.h"

namespace kvaudit::records {
namespace {

using Member = std::variant<std::string ShardProvenance::*, int ShardProvenance::*,
                            std::uint64_t ShardProvenance::*>;

struct ProvenanceField {
  const char* name;
  Member member;
  std::int64_t since_version = 1;  // the first schema version that has the attribute
  bool optional = false;           // read as "" when absent (descriptive, never checked)
};

#define KV_PROV(member) \
  ProvenanceField { #member, &ShardProvenance::member, 1 }

const std::array kProvenanceFields{
    KV_PROV(schema_version),
    KV_PROV(manifest_sha256),
    KV_PROV(manifest_path),
    KV_PROV(n_cells_manifest),
    KV_PROV(study_name),
    KV_PROV(tool_version),
    KV_PROV(git_commit),
    KV_PROV(git_dirty),
    KV_PROV(build_type),
    KV_PROV(compiler),
    KV_PROV(cxx_flags),
    KV_PROV(hdf5_version),
    KV_PROV(mpi_library_version),
    KV_PROV(hostname),
    KV_PROV(rank),
    KV_PROV(world_size),
    KV_PROV(local_rank),
    KV_PROV(cuda_visible_devices),
    KV_PROV(gpu_name),
    KV_PROV(gpu_uuid),
    KV_PROV(driver_version),
    KV_PROV(cuda_runtime_version),
    KV_PROV(slurm_job_id),
    KV_PROV(slurm_step_id),
    KV_PROV(slurm_array_task_id),
    KV_PROV(slurm_restart_count),
    KV_PROV(slurm_job_nodelist),
    KV_PROV(global_seed),
    KV_PROV(rng),
    KV_PROV(attempt),
    KV_PROV(t_open_utc),
    KV_PROV(t_close_utc),
    ProvenanceField{"launch_id", &ShardProvenance::launch_id, 3},
    ProvenanceField{"salvaged_from", &ShardProvenance::salvaged_from, 3},
    ProvenanceField{"cpu_model", &ShardProvenance::cpu_model, 4, true},
    ProvenanceField{"blas_core", &ShardProvenance::blas_core, 4, true},
};

#undef KV_PROV

}  // namespace

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) return "";
    const auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

std::string host_name() {
  std::array<char, HOST_NAME_MAX + 1> buffer{};
  if (::gethostname(buffer.data(), buffer.size() - 1) != 0) return "unknown";
  return buffer.data();
}

std::string hdf5_library_version() {
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace

void fill_process_provenance(ShardProvenance& p) {
  const BuildInfo& build = build_info();
  p.tool_version = build.version;
  p.git_commit = build.git_commit;
  p.git_dirty = build.git_dirty;
  p.build_type = build.build_type;
  p.compiler = build.compiler;
  p.cxx_flags = build.cxx_flags;
  p.hdf5_version = hdf5_library_version();
  p.hostname = host_name();
  p.cpu_model = cpu_model_name();
  p.cuda_visible_devices = environment("CUDA_VISIBLE_DEVICES");
  p.slurm_job_id = environment("SLURM_JOB_ID");
  p.slurm_step_id = environment("SLURM_STEP_ID");
  p.slurm_array_task_id = environment("SLURM_ARRAY_TASK_ID");
  p.slurm_restart_count = environment("SLURM_RESTART_COUNT");
  p.slurm_job_nodelist = environment("SLURM_JOB_NODELIST");
}

void write_provenance(hid_t file_id, const ShardProvenance& p, const std::string& file) {
  for (const ProvenanceField& field : kProvenanceFields) {
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(p.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            // Environment values need not be UTF-8; h5py must still decode every attribute.
            h5::write_string_attribute(file_id, field.name, make_valid_utf8(p.*member), file);
          } else if constexpr (std::is_same_v<T, int>) {
            h5::write_int64_attribute(file_id, field.name, p.*member, file);
          } else {
            h5::write_uint64_attribute(file_id, field.name, p.*member, file);
          }
        },
        field.member);
  }
}

ShardProvenance read_provenance(hid_t file_id, const std::string& file) {
  ShardProvenance p;
  const std::int64_t version = h5::read_int64_attribute(file_id, "schema_version", file);
  if (version < kOldestReadableSchemaVersion || version > kSchemaVersion) {
    throw InputError(file + ": schema_version " + std::to_string(version) +
                     " is not supported (this build reads versions " +
                     std::to_string(kOldestReadableSchemaVersion) + " to " +
                     std::to_string(kSchemaVersion) + ")");
  }
  for (const ProvenanceField& field : kProvenanceFields) {
    if (version < field.since_version) continue;
    if (field.optional && H5Aexists(file_id, field.name) <= 0) continue;
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(p.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            p.*member = h5::read_string_attribute(file_id, field.name, file);
          } else if constexpr (std::is_same_v<T, int>) {
            const std::int64_t value = h5::read_int64_attribute(file_id, field.name, file);
            if (value < std::numeric_limits<int>::min() ||
                value > std::numeric_limits<int>::max()) {
              throw InputError(file + ": attribute '" + field.name +
                               "' is out of range: " + std::to_string(value));
            }
            p.*member = static_cast<int>(value);
          } else {
            p.*member = h5::read_uint64_attribute(file_id, field.name, file);
          }
        },
        field.member);
  }
  return p;
}

std::vector<std::pair<std::string, std::string>> provenance_items(const ShardProvenance& p) {
  std::vector<std::pair<std::string, std::string>> items;
  items.reserve(kProvenanceFields.size());
  for (const ProvenanceField& field : kProvenanceFields) {
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(p.*member)>;
          if constexpr (std::is_same_v<T, std::string>) {
            items.emplace_back(field.name, p.*member);
          } else {
            items.emplace_back(field.name, std::to_string(p.*member));
          }
        },
        field.member);
  }
  return items;
}

}  // namespace kvaudit::records

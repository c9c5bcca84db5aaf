// Shard file names:
//   part-<job>.<step>.t<restart>.a<attempt>.pid<pid>.<launch>-r<rank>.s<seq>.h5
// (+ ".tmp" while written; the published shard's SHA-256 sidecar is "<name>.sha256").
//
// job/step/restart come from SLURM_JOB_ID / SLURM_STEP_ID / SLURM_RESTART_COUNT ("local", "0", "0"
// outside Slurm), attempt is the study attempt of the launch, pid is rank 0's pid and launch a
// random id rank 0 draws (make_launch_id) — both broadcast, so all ranks of one launch agree —,
// seq counts rotations. A second srun step, a requeue, a rotation, a relaunch, and a relaunch whose
// pid repeats (containers, PID namespaces: same pid, different attempt and launch id) all pick a
// new name; H5F_ACC_EXCL plus link() make a collision an error instead of a loss.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvaudit::records {

inline constexpr std::string_view kShardPrefix = "part-";
inline constexpr std::string_view kPublishedSuffix = ".h5";
inline constexpr std::string_view kTempSuffix = ".h5.tmp";
inline constexpr std::string_view kChecksumSuffix = ".h5.sha256";

struct ShardNameParts {
  std::string job = "local";
  std::string step = "0";
  std::string restart = "0";
  int attempt = 1;
  std::int64_t pid = 0;
  std::string launch_id;  // [A-Za-z0-9]+, e.g. 8 hex digits from make_launch_id()
  int rank = 0;
  std::uint32_t seq = 0;
};

// job/step/restart from the Slurm environment, each reduced to [A-Za-z0-9_-] (other characters
// become '_') so that they cannot break the name apart. launch_id is reduced to [A-Za-z0-9].
ShardNameParts shard_name_parts_from_environment(int attempt, std::int64_t launch_pid,
                                                 const std::string& launch_id, int rank,
                                                 std::uint32_t seq);

// 8 lowercase hex digits from the kernel's random source (getrandom), drawn once per launch.
std::string make_launch_id();

// The published file name (no directory), e.g. "part-local.0.t0.a1.pid4242.9f3c01ab-r3.s0.h5".
std::string shard_file_name(const ShardNameParts& parts);

bool is_published_shard_name(std::string_view file_name);
bool is_temp_shard_name(std::string_view file_name);
bool is_checksum_file_name(std::string_view file_name);

}  // namespace kvaudit::records

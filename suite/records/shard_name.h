// Shard file names: part-<job>.<step>.t<restart>.pid<pid>-r<rank>.s<seq>.h5 (+ ".tmp" while
// written).
//
// job/step/restart come from SLURM_JOB_ID / SLURM_STEP_ID / SLURM_RESTART_COUNT ("local", "0", "0"
// outside Slurm), pid is rank 0's pid (so all ranks of one launch agree), seq counts rotations.
// Together they make a second srun step, a requeue or a rotation pick a new name, and H5F_ACC_EXCL
// plus link() make a collision an error instead of a loss.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvaudit::records {

inline constexpr std::string_view kShardPrefix = "part-";
inline constexpr std::string_view kPublishedSuffix = ".h5";
inline constexpr std::string_view kTempSuffix = ".h5.tmp";

struct ShardNameParts {
  std::string job = "local";
  std::string step = "0";
  std::string restart = "0";
  std::int64_t pid = 0;
  int rank = 0;
  std::uint32_t seq = 0;
};

// job/step/restart from the Slurm environment, each reduced to [A-Za-z0-9_-] (other characters
// become '_') so that they cannot break the name apart.
ShardNameParts shard_name_parts_from_environment(std::int64_t launch_pid, int rank,
                                                 std::uint32_t seq);

// The published file name (no directory), e.g. "part-local.0.t0.pid4242-r3.s0.h5".
std::string shard_file_name(const ShardNameParts& parts);

bool is_published_shard_name(std::string_view file_name);
bool is_temp_shard_name(std::string_view file_name);

}  // namespace kvaudit::records

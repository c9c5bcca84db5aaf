// Shard file names from the Slurm environment, rank 0's pid, the rank and the rotation counter.
#include "suite/records/shard_name.h"

#include <cstdlib>
#include <string>

namespace kvaudit::records {
namespace {

std::string name_component(const char* variable, const char* fallback) {
  const char* raw = std::getenv(variable);
  if (raw == nullptr || *raw == '\0') return fallback;
  std::string value(raw);
  for (char& c : value) {
    const bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-';
    if (!keep) c = '_';
  }
  return value;
}

bool has_shard_prefix_and_suffix(std::string_view name, std::string_view suffix) {
  return name.size() > kShardPrefix.size() + suffix.size() && name.starts_with(kShardPrefix) &&
         name.ends_with(suffix);
}

}  // namespace

ShardNameParts shard_name_parts_from_environment(std::int64_t launch_pid, int rank,
                                                 std::uint32_t seq) {
  ShardNameParts parts;
  parts.job = name_component("SLURM_JOB_ID", "local");
  parts.step = name_component("SLURM_STEP_ID", "0");
  parts.restart = name_component("SLURM_RESTART_COUNT", "0");
  parts.pid = launch_pid;
  parts.rank = rank;
  parts.seq = seq;
  return parts;
}

std::string shard_file_name(const ShardNameParts& p) {
  return std::string(kShardPrefix) + p.job + "." + p.step + ".t" + p.restart + ".pid" +
         std::to_string(p.pid) + "-r" + std::to_string(p.rank) + ".s" + std::to_string(p.seq) +
         std::string(kPublishedSuffix);
}

bool is_published_shard_name(std::string_view file_name) {
  return has_shard_prefix_and_suffix(file_name, kPublishedSuffix);
}

bool is_temp_shard_name(std::string_view file_name) {
  return has_shard_prefix_and_suffix(file_name, kTempSuffix);
}

}  // namespace kvaudit::records

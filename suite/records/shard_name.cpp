// Shard file names from the Slurm environment, rank 0's pid, the rank and the rotation counter.
#include "suite/records/shard_name.h"

#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/errors.h"

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

ShardNameParts shard_name_parts_from_environment(int attempt, std::int64_t launch_pid,
                                                 const std::string& launch_id, int rank,
                                                 std::uint32_t seq) {
  ShardNameParts parts;
  parts.job = name_component("SLURM_JOB_ID", "local");
  parts.step = name_component("SLURM_STEP_ID", "0");
  parts.restart = name_component("SLURM_RESTART_COUNT", "0");
  parts.attempt = attempt;
  parts.pid = launch_pid;
  for (char c : launch_id) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      parts.launch_id.push_back(c);
    }
  }
  if (parts.launch_id.empty()) parts.launch_id = "0";
  parts.rank = rank;
  parts.seq = seq;
  return parts;
}

std::string make_launch_id() {
  std::array<unsigned char, 4> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InternalError(std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 0xf]);
  }
  return id;
}

std::string shard_file_name(const ShardNameParts& p) {
  return std::string(kShardPrefix) + p.job + "." + p.step + ".t" + p.restart + ".a" +
         std::to_string(p.attempt) + ".pid" + std::to_string(p.pid) + "." + p.launch_id + "-r" +
         std::to_string(p.rank) + ".s" + std::to_string(p.seq) + std::string(kPublishedSuffix);
}

bool is_published_shard_name(std::string_view file_name) {
  return has_shard_prefix_and_suffix(file_name, kPublishedSuffix);
}

bool is_temp_shard_name(std::string_view file_name) {
  return has_shard_prefix_and_suffix(file_name, kTempSuffix);
}

bool is_checksum_file_name(std::string_view file_name) {
  return has_shard_prefix_and_suffix(file_name, kChecksumSuffix);
}

}  // namespace kvaudit::records

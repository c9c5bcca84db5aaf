// Reading a shard that no checksum vouches for (an unpublished .tmp, a published shard without or
// failing its sidecar) in a child process first: HDF5 1.10 can crash (SIGSEGV in H5HG_read) or
// hang on damaged files, and neither may take `kvaudit run`, `reduce` or `inspect` down.
//
// probe_shard_isolated forks; the child reads the shard with read_shard and reports success or the
// InputError text through a pipe; the parent waits at most `timeout`, then kills it. Only when the
// child succeeded does read_shard_isolated read the file in this process (reading is
// deterministic: the file's writer is gone, so the same bytes are read again).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "suite/records/shard_reader.h"

namespace kvaudit::records {

enum class ProbeOutcome {
  readable,   // the child read the shard
  refused,    // the child's read_shard threw InputError (message)
  crashed,    // the child died from a signal
  timed_out,  // the child did not finish in time and was killed
};

struct ProbeResult {
  ProbeOutcome outcome = ProbeOutcome::readable;
  std::string message;  // "<file>: …" for anything but `readable`
};

inline constexpr std::chrono::seconds kDefaultIsolationTimeout{120};

ProbeResult probe_shard_isolated(const std::filesystem::path& file, ShardReadMode mode,
                                 std::chrono::milliseconds timeout);

// probe_shard_isolated, then read_shard here; InputError naming the file (crash, hang, refusal).
ShardContents read_shard_isolated(const std::filesystem::path& file, ShardReadMode mode,
                                  std::chrono::milliseconds timeout);

}  // namespace kvaudit::records

// kvaudit inspect STUDY --cell ID --selections [--out FILE]: re-derives one recorded cell and shows
// what it answered from and what it kept.
//
// The study is loaded as reduce loads it (lock, manifest, expansion, verified shards); the cell
// is re-run alone on the CPU (suite/run/unit_executor.h with a UnitTrace: the same instance
// building, tokenization, method and fan-out as `kvaudit run`; a record depends only on its cell),
// with the OpenBLAS kernels `run` uses (main.cpp forces them for inspect as for run: another
// kernel set sums in another order, which moves near-tied scores). Written to FILE (default:
// standard output), as JSON lines:
//   line 1   {"cell_id", "unit_id", "model", "task", "instance", "method", "budget_kind",
//            "budget", "protocol", "attention_backend", "boundary", "layers", "kv_heads",
//            "prompt_ids": {"context": [...], "question": [...], "suffix": [...]},
//            "prompt_digest", "kept_digest", "output", and the recorded values beside them}
//   then     {"layer": l, "kv_head": h, "kept": [positions...]} per layer and KV head (a full-KV
//            cell: every position below the boundary)
// The digests (16 hex digits, suite/records/content_digests.h) are recomputed from what was
// re-derived and compared with the record's; a summary goes to standard error. Returns 0 when the
// prompt digest, the kept digest and the output all equal the record's, 1 when one differs (the
// message says which; a record made on another device or by an older version may differ for that
// reason, and a record of schema < 4 has no digests to compare).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace kvaudit::cli {

struct InspectSelectionsOptions {
  std::filesystem::path study;                    // the study's output directory
  std::string cell;                               // 16 hex digits (as tables print it) or decimal
  std::optional<std::filesystem::path> out;       // default: standard output
  std::optional<std::filesystem::path> manifest;  // default: the lock's manifest_path
};

int inspect_selections(const InspectSelectionsOptions& options);

// The cell id as written by a user: 16 hex digits (optionally 0x-prefixed) or a decimal number.
// Throws InputError naming `what` otherwise.
std::uint64_t parse_cell_id(const std::string& text, const std::string& what);

}  // namespace kvaudit::cli

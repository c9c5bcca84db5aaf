// `kvaudit verify --rerun K --model NAME=PATH …`: re-executes K recorded cells on the evaluator's
// hardware and compares them with the bundled records.
//
// Choice: the `ok` records sorted by cell id, shuffled by a Fisher–Yates pass driven by
// std::mt19937_64(seed) (the standard fixes its output sequence, so the choice is the same on any
// platform; index = draw mod remaining), the first K taken. The seed is printed.
// Models: every model of a chosen cell must be given as NAME=PATH (the bundle carries no weights);
// each file given must match the lock's fingerprint (size + SHA-256), else nothing is re-run.
// Execution: suite/run's UnitExecutor on the CPU backend (the process forces the OpenBLAS kernels
// `kvaudit run` uses: another kernel set sums in another order, which moves near-tied scores),
// the chosen cells of one unit together — a record depends only on its cell (unit_executor.h).
// Comparison per cell: status, output, score (bit for bit), prompt digest and kept digest (when
// the record has them). A mismatch says whether the recorded device (the shard that wrote the
// record: a GPU name and a bf16 model mean the CUDA backend) or backend differs from the re-run's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>

#include "suite/reduce/study_loader.h"

namespace kvaudit::artifacts {

struct RerunOptions {
  std::int64_t cells = 0;
  std::uint64_t seed = 0;
  std::map<std::string, std::filesystem::path> models;  // manifest model name → weights path
};

struct RerunSummary {
  std::int64_t chosen = 0;
  std::int64_t identical = 0;  // output, score and digests equal
  std::int64_t different = 0;
  std::int64_t different_device = 0;  // of the different: recorded on another device
  bool ok() const { return different == 0 && chosen > 0; }
};

// `study` is the bundle loaded as reduce loads it (its records, manifest and lock). InputError for
// a missing or mismatching model, K < 1 or K larger than the ok records.
RerunSummary rerun_cells(const reduce::LoadedStudy& study, const RerunOptions& options,
                         std::ostream& out);

}  // namespace kvaudit::artifacts

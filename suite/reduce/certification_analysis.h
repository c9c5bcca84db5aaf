// Risk certification per preregistered (block, model) (seed 000; statistics/certification.h).
//
// Requests: the block's benchmark instances of the calibration (resp. test) split, on the
// block's backend, for one model of its grid, ordered by (task, instance). For candidate j and
// request i: V_ij = 1{U_full(x_i) − U_λj(x_i) > τ}, with U_full the full-KV cell of the same unit
// and protocol. A request whose full-KV cell is excluded (tokenizer check) leaves n. A request
// whose full-KV or candidate cell is missing, failed or excluded alone counts as a violation of
// that candidate (worst case): K_j can only grow, so a certificate computed this way stays valid
// whatever the missing utilities would have been; the row is marked partial.
// The fixed-sequence procedure, K*, the plug-in choice and the test-split evaluation come from
// stats::certify. Per-task test risk: Clopper–Pearson at 1 − α/m over the manifest's
// certification_task_risk family (m from the lock) when declared, else over the block's tasks
// (stats::certify's family); flagged when the lower bound exceeds ε.
// The contract itself was checked against the lock when the study was loaded (lock_check.h).
// Reuse blocks (protocol = "reuse") are not certified: the LTT binomial p-value needs independent
// requests and the questions of one context share its compression; until a context-level risk is
// defined (docs/design/reuse.md §Reduce), such a run is reported with computed = false and
// kReuseNotCertified as its reason (its request counts are those of question 0).
//
// Contract kinds (manifest risk(s), bound, loss_epsilon, procedure, starts, per_task; see
// statistics/certification.h): losses L_ij = clip(U_full − U_λj, 0, 1), a missing or failed cell
// counting as loss 1 (the worst case, as for violations); stats::certify with the block's kind.
// A block with sequential = true is also replayed by replay_sequential_calibration
// (sequential_calibration.h) on its violation indicators at ε (or, without the violation risk, its
// losses at ε): its decisions, requests used and compute saved are reported beside the fixed-n
// certificate. The tables gain the contract-kind columns only when some block uses a kind other
// than the original contract, so a study without them gets byte-identical tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statistics/certification.h"
#include "suite/reduce/analysis_context.h"
#include "suite/reduce/families.h"
#include "suite/reduce/sequential_calibration.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

inline constexpr const char* kReuseNotCertified =
    "reuse cells are not certified: the Learn-then-Test binomial p-value needs independent "
    "requests, and the questions of one context share its compression";

struct CertificationRun {
  std::size_t block = 0;  // index into Manifest::certifications
  std::uint16_t model = 0;
  std::string benchmark, method, protocol, backend;
  std::vector<double> candidates;  // the declared budgets, preregistered order
  std::vector<std::string> candidate_ids;
  std::vector<double> retention;         // per candidate: retention (x axis of the figure)
  std::string retention_source;          // "declared" or "realised (mean kept_bytes/full_bytes)"
  std::int64_t calibration_planned = 0;  // calibration requests of the split
  std::int64_t test_planned = 0;
  std::int64_t calibration_excluded = 0;  // requests left out (full-KV cell excluded)
  std::int64_t test_excluded = 0;
  std::int64_t calibration_imputed = 0;  // (request, candidate) pairs counted as violations
  std::int64_t test_imputed = 0;
  std::vector<std::int64_t> test_violations;  // per candidate
  std::vector<double> test_mean_loss{};       // per candidate (mean_loss blocks; else empty)
  std::optional<SequentialCalibrationResult> sequential{};  // sequential = true blocks
  // Frame cells of a sequential block that `kvaudit run` did not need: a candidate's calibration
  // cells after its decision in the preregistered order (and the full-KV reference cells after
  // the last decision) that have no record. Coverage counts them as skipped, not missing.
  std::vector<std::size_t> sequential_skipped{};
  bool partial = false;
  bool computed = false;  // false when no calibration request was usable
  std::string not_computed_reason;
  stats::CertificationResult result;
  std::vector<stats::TaskRisk> task_risk;  // of the selected policy, over `task_family`
};

struct Certification {
  ResolvedFamily task_family;  // declared, or m = tasks of each block (per_block_family)
  bool per_block_family = false;
  bool contract_kinds = false;  // some block's contract is not the original one (extra columns)
  std::vector<CertificationRun> runs;
};

// The statistics kind of a manifest block.
stats::ContractKind contract_kind(const manifest::Certification& block);

Certification compute_certification(const AnalysisContext& ctx);
std::vector<Table> certification_tables(const AnalysisContext& ctx, const Certification& cert);

}  // namespace kvaudit::reduce

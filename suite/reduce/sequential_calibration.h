// Sequential calibration of a certification block (manifest `sequential = true`; issue 17 item 3;
// docs/design/sequential.md): replays, from the records, the anytime-valid tests that
// `kvaudit run` used to stop calibrating candidates early, and reports each candidate's decision,
// the requests it used, its e-value, the compute saved and the certified set under fixed sequence.
//
// One sequential calibration is a certification run: (block, model). Its requests are the block's
// calibration units of that model, benchmark and backend, indexed 0..n−1 in the canonical order
// (task, instance) — the order certification_analysis uses. Their preregistered order, keyed by
// the study seed and the block name (so every model of a block shares it), is a
// Fisher–Yates shuffle driven by Philox4x32-10 (statistics/rng.h):
//   key     = philox_key(study seed)                 — (seed & 0xffffffff, seed >> 32)
//   h       = FNV-1a 64 of the block name (UTF-8 bytes; offset 0xcbf29ce484222325,
//             prime 0x100000001b3)
//   counter = (⌊i/2⌋, h & 0xffffffff, h >> 32, 0x53455155 "SEQU")
//   u_i     = word i of the stream (even i: (w1 << 32) | w0, odd i: (w3 << 32) | w2)
//   for i = n−1 … 1: j = ⌊u_i·(i+1)/2⁶⁴⌋ (draw_index), swap(order[i], order[j])
// starting from the identity. It depends only on (seed, block name, n), so `kvaudit run` (which
// schedules the calibration units in this order, suite/run/sequential_schedule.h) and reduce agree.
//
// Replay (stats::sequential_fixed_sequence semantics, request by request along the order):
//   * an excluded request (its full-KV cell excluded: it leaves n, as in certification_analysis)
//     is skipped: no candidate observes it;
//   * a missing (absent, failed or excluded) candidate cell counts as loss 1, the worst case. The
//     losses stay i.i.d. across requests with mean ≥ the true risk, so the test stays valid; the
//     cells `kvaudit run` dropped after a candidate stopped lie after its decision and are never
//     read;
//   * n_max = the number of requests in the order (planned, before exclusions), as in the run.
// Compute saved: candidate j's cells after its stop, saved_j = n − used_j, with n the requests not
// excluded; the full-KV reference cells after the last candidate stopped, n − max_j used_j.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statistics/sequential_test.h"

namespace kvaudit::reduce {

inline constexpr std::uint32_t kSequentialOrderTag = 0x53455155u;  // "SEQU"

// The loss of a candidate on one request, shared by `kvaudit run` (sequential_schedule.h) and
// reduce so that both replay the same tests: violation: 1{full − candidate > τ}; mean_loss:
// clip(full − candidate, 0, 1). Scores are utilities in [0, 1].
enum class SequentialRisk { violation, mean_loss };
double sequential_loss(SequentialRisk risk, double tau, double full_score, double candidate_score);

// FNV-1a 64 of `text` (the block name hash of the order's counter).
std::uint64_t fnv1a64(const std::string& text);

// The preregistered order: a permutation of 0..n−1 (see above). n < 2^32.
std::vector<std::size_t> sequential_request_order(std::uint64_t study_seed,
                                                  const std::string& block, std::size_t n);

struct SequentialCandidateLosses {
  std::string id;                     // e.g. "snapkv@0.25"
  std::vector<double> losses;         // per request (canonical order, length n), in [0, 1]
  std::vector<std::uint8_t> missing;  // per request, 1 = cell missing/failed (loss 1); empty = none
};

struct SequentialCalibrationInput {
  std::string block;       // the certification block's name (order key, error messages)
  std::uint64_t seed = 0;  // the study seed
  double epsilon = 0, delta = 0;
  std::vector<SequentialCandidateLosses> candidates;  // preregistered order, J ≥ 1
  std::vector<std::uint8_t> excluded;  // per request, 1 = left out of n; empty = none
};

struct SequentialCandidateReport {
  std::string id;
  stats::SequentialDecision decision = stats::SequentialDecision::undecided;
  std::int64_t requests_used = 0;  // requests observed until the decision (or the end)
  double e_value = 1;              // M at that point
  bool stopped_early = false;      // stopped because an earlier candidate cannot certify
  bool certified = false;          // own test certified and every earlier candidate's
  std::int64_t imputed = 0;        // observed requests whose cell was missing (loss 1)
  std::int64_t cells_saved = 0;    // n − requests_used
};

struct SequentialCalibrationResult {
  std::string block;
  std::int64_t n_max = 0;                             // requests in the order (planned)
  std::int64_t n = 0;                                 // requests not excluded
  std::vector<std::size_t> order;                     // the preregistered order (request indices)
  std::vector<SequentialCandidateReport> candidates;  // preregistered order
  std::optional<std::size_t> selected;                // last certified candidate; nullopt = full KV
  std::string selected_policy;                        // its id, or "full-kv"
  std::size_t stop_index = 0;              // first candidate not certified (J when all are)
  std::int64_t candidate_cells_saved = 0;  // Σ_j (n − used_j)
  std::int64_t candidate_cells_total = 0;  // J · n
  std::int64_t reference_cells_saved = 0;  // n − max_j used_j (full-KV cells)
  double fraction_saved() const {          // of the candidate cells
    return candidate_cells_total > 0 ? static_cast<double>(candidate_cells_saved) /
                                           static_cast<double>(candidate_cells_total)
                                     : 0.0;
  }
};

// Pure: throws kvaudit::InputError (message starts with input.block) for no candidates, an
// invalid ε or δ, vectors of different lengths, n = 0, a loss outside [0, 1].
SequentialCalibrationResult replay_sequential_calibration(const SequentialCalibrationInput& input);

}  // namespace kvaudit::reduce

// Deterministic test content for shards: the record of global cell index g, field by field.
//
// tests/records/record_formula.py computes the same values in Python (for the h5py checks); the
// two must change together. Doubles use single IEEE operations on exact inputs so that C++ and
// Python produce identical bits.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>

#include "suite/records/cell_record.h"

namespace kvaudit::records::testing {

// UTF-8 text with 2-, 3- and 4-byte sequences.
inline const std::string kMultibyte = "naïve — 東京 ✓ 🙂";
// Over 100 KB: the long output of some records.
inline std::string long_output() {
  std::string text;
  for (int i = 0; i < 10000; ++i) text += "0123456789";
  return text + "東京";
}

inline CellRecord formula_record(std::uint64_t g, int rank, int attempt) {
  static const std::array<std::string, 3> models{"Llama-3.1-8B-Instruct", "Qwen2.5-7B-Instruct",
                                                 "naïve — 東京 ✓ model"};
  static const std::array<std::string, 2> benchmarks{"ruler", "longbench"};
  static const std::array<std::string, 6> method_ids{"full", "snapkv", "keydiff",
                                                     "tova", "",       "expected_attention"};
  CellRecord r;
  r.cell_id = (g + 1) * 0x9E3779B97F4A7C15ULL;  // odd multiplier: a bijection on uint64
  r.unit_id = g / 7;
  r.attempt = attempt;
  r.rank = rank;
  r.status = static_cast<CellStatus>(g % 5);
  r.model = models[g % 3];
  r.benchmark = benchmarks[g % 2];
  r.task = "niah_single_" + std::to_string(g % 3 + 1);
  r.method = "method-config-" + std::to_string(g % 6);
  r.method_id = method_ids[g % 6];
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx",
                static_cast<unsigned long long>(g * 0x2545F4914F6CDD1DULL));
  r.params_digest = digest;
  // Stored values, as record_formula.py writes them (sdpa = 0, eager = 1; query-aware = 0).
  r.attention_backend = *enum_from_stored<AttentionBackend>(static_cast<std::int8_t>(g % 2));
  r.protocol = *enum_from_stored<Protocol>(static_cast<std::int8_t>((g / 2) % 2));
  r.split = static_cast<Split>(g % 3);
  r.budget_kind = static_cast<BudgetKind>(g % 4);
  const double tenth = static_cast<double>(g % 10) / 10.0;
  if (r.budget_kind == BudgetKind::compression) r.compression = tenth;
  if (r.budget_kind == BudgetKind::compression || r.budget_kind == BudgetKind::retention) {
    r.retention = 1.0 - tenth;
  }
  if (r.budget_kind == BudgetKind::threshold) r.threshold = static_cast<double>(g % 32) / 64.0;
  r.instance = g % 11 == 10 ? 4294967295U : static_cast<std::uint32_t>(g % 100);
  r.nominal_length = 4096U << (g % 4);
  r.n_prompt_tokens = static_cast<std::uint32_t>(1000 + g);
  r.n_context_tokens = static_cast<std::uint32_t>(900 + g);
  r.n_question_tokens = static_cast<std::uint32_t>(50 + g % 13);
  r.n_generated_tokens = static_cast<std::uint32_t>(g % 64);
  r.kept_tokens = g * 3;
  r.kept_bytes = (std::uint64_t{1} << 40) + g * 131072;
  r.full_bytes = 0xFFFFFFFFFFFFFFFFULL - g;
  r.realised_retention = static_cast<double>(g % 100) / 100.0;
  if (r.status == CellStatus::ok) r.score = static_cast<double>(g % 17) / 16.0;
  r.t_start_ns = 1700000000000000000LL + static_cast<std::int64_t>(g) * 1000003;
  r.t_end_ns = g % 13 == 12 ? -1 : r.t_start_ns + 12345 + static_cast<std::int64_t>(g);
  r.prefill_ms = static_cast<double>(g) * 0.25;
  if (r.status == CellStatus::ok) r.decode_ms = static_cast<double>(g) / 3.0;
  if (r.status != CellStatus::ok) r.error = "cell " + std::to_string(g) + " failed: " + kMultibyte;
  if (g % 7 == 0) {
    r.output = "";
  } else if (g % 50 == 1) {
    r.output = long_output();
  } else {
    r.output = "answer " + std::to_string(g) + ": " + kMultibyte;
  }
  r.prompt_digest = (g * 0x9E3779B97F4A7C15ULL) ^ 0xFFFFFFFF00000000ULL;
  r.kept_digest = g % 5 == 0 ? 0 : 0xFFFFFFFFFFFFFFFFULL - g * 7;
  // Schema version 5: the costs (NaN where the cell never reached the step).
  r.cell_prefill_ms = static_cast<double>(g) * 0.125;
  if (g % 4 != 3) r.cell_capture_ms = static_cast<double>(g % 9) / 8.0;
  if (g % 6 == 5) r.cell_extra_pass_ms = static_cast<double>(g) * 2.0;
  r.cell_select_ms = static_cast<double>(g % 33) / 32.0;
  r.cell_evict_ms = static_cast<double>(g % 65) / 64.0;
  if (r.status == CellStatus::ok) {
    r.cell_feed_ms = static_cast<double>(g) * 0.5;
    r.cell_decode_ms = static_cast<double>(g) / 5.0;
  }
  r.peak_kv_bytes = g % 5 == 4 ? 0 : (std::uint64_t{1} << 41) + g * 65536;
  r.shared_costs = static_cast<std::uint32_t>(g % 32);
  r.device = static_cast<ComputeDevice>(g % 3);
  r.threads = static_cast<std::int32_t>(g % 17);
  // Schema version 6: reuse (question of n_questions) and decode-time compression.
  r.question = static_cast<std::uint32_t>(g % 5);
  r.n_questions = static_cast<std::uint32_t>(g % 5 + 1 + g % 2);
  r.final_kv_bytes = r.peak_kv_bytes == 0 ? 0 : r.peak_kv_bytes - (g % 3) * 4096;
  r.decode_compressions = static_cast<std::uint32_t>(g % 7);
  return r;
}

}  // namespace kvaudit::records::testing

// The tokenizer check (docs/design/benchmarks.md §Tokenizer check): RULER's nominal length is a
// promise about the tokenizer the data was sized with. Before a run, every final prompt is
// re-measured with the EVALUATED model's tokenizer and chat template, in the runner's split
// (prompt_measure.h), and an instance is kept only when
//     prompt tokens + max_new_tokens ≤ limit = min(model max_position_embeddings, configured
//                                                   runtime context, when one is set).
// An instance that does not fit is excluded — never truncated: cutting a RULER haystack can cut
// the needle and make the gold answer wrong — with its reason recorded. The per-task report gives
// the nominal L, the generation tokenizer's lengths, the evaluated min / median / max, the ratio
// of the evaluated to the generation median and the number excluded.
// The pitfall it guards against: data sized with tokenizer A (kvpress's RULER set: Llama-3.1, no
// chat template) and evaluated with tokenizer B (its chat template added) can overflow B's window.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "suite/benchmarks/ruler/prompt_measure.h"
#include "suite/benchmarks/ruler/ruler_instance.h"

namespace kvaudit::benchmarks {

struct CheckLimits {
  std::int64_t max_positions = 0;                // the model's max_position_embeddings
  std::optional<std::int64_t> configured_limit;  // the runtime context, when configured
  std::int64_t limit() const;
  std::string describe() const;  // "min(max_position_embeddings 8192, configured 6000) = 6000"
};

struct InstanceCheck {
  std::string task;
  std::int64_t index = 0;
  std::string tokenizer;
  std::int64_t limit = 0;
  int max_new_tokens = 0;
  std::int64_t generation_total = 0;  // the generation tokenizer's prompt + max_new_tokens
  ruler::PromptTokens tokens;         // evaluated
  bool fits = true;
  std::string reason;  // empty when it fits
  std::int64_t total_tokens() const { return tokens.prompt() + max_new_tokens; }
};

struct TaskCheckSummary {
  std::string task;
  std::int64_t nominal_length = 0;
  std::int64_t instances = 0;
  std::int64_t generation_min = 0, generation_median = 0, generation_max = 0;  // totals
  std::int64_t evaluated_min = 0, evaluated_median = 0, evaluated_max = 0;     // totals
  double ratio = 0;  // evaluated median / generation median
  std::int64_t excluded = 0;
};

struct TokenizerCheckReport {
  std::string tokenizer;  // evaluated side
  CheckLimits limits;
  std::vector<InstanceCheck> instances;  // in input order
  std::vector<TaskCheckSummary> tasks;   // in order of first appearance

  std::int64_t excluded() const;
};

// Re-measures every instance with `evaluated` and applies the limit.
TokenizerCheckReport check_ruler_instances(std::span<const ruler::RulerInstance> instances,
                                           const ruler::PromptMeasurer& evaluated,
                                           const CheckLimits& limits);

// A fixed-width table, one row per task, then one line per excluded instance (with its reason).
std::string format_check_report(const TokenizerCheckReport& report);

// The median as numpy computes it on integers, rounded half up to an integer token count (the
// mean of the two middle values for an even count). `values` must not be empty.
std::int64_t median_tokens(std::vector<std::int64_t> values);

}  // namespace kvaudit::benchmarks

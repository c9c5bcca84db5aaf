// Content comparison of two records of one cell (see record_comparison.h).
#include "suite/records/record_comparison.h"

#include <bit>
#include <cmath>

namespace kvaudit::records {
namespace {

bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}
template <typename T>
bool same(const T& a, const T& b) {
  return a == b;
}

}  // namespace

std::vector<std::string> differing_content_fields(const CellRecord& a, const CellRecord& b) {
  std::vector<std::string> out;
#define KV_COMPARE(field) \
  if (!same(a.field, b.field)) out.emplace_back(#field)
  KV_COMPARE(cell_id);
  KV_COMPARE(unit_id);
  KV_COMPARE(status);
  KV_COMPARE(model);
  KV_COMPARE(benchmark);
  KV_COMPARE(task);
  KV_COMPARE(method);
  KV_COMPARE(method_id);
  KV_COMPARE(params_digest);
  KV_COMPARE(attention_backend);
  KV_COMPARE(protocol);
  KV_COMPARE(split);
  KV_COMPARE(budget_kind);
  KV_COMPARE(compression);
  KV_COMPARE(retention);
  KV_COMPARE(threshold);
  KV_COMPARE(instance);
  KV_COMPARE(nominal_length);
  KV_COMPARE(n_prompt_tokens);
  KV_COMPARE(n_context_tokens);
  KV_COMPARE(n_question_tokens);
  KV_COMPARE(n_generated_tokens);
  KV_COMPARE(kept_tokens);
  KV_COMPARE(kept_bytes);
  KV_COMPARE(full_bytes);
  KV_COMPARE(realised_retention);
  KV_COMPARE(score);
  KV_COMPARE(error);
  KV_COMPARE(output);
#undef KV_COMPARE
  // The content digests (schema version 4) where both records have them: a record read from an
  // older shard has 0 = unknown, which is not a difference.
  if (a.prompt_digest != 0 && b.prompt_digest != 0 && a.prompt_digest != b.prompt_digest) {
    out.emplace_back("prompt_digest");
  }
  if (a.kept_digest != 0 && b.kept_digest != 0 && a.kept_digest != b.kept_digest) {
    out.emplace_back("kept_digest");
  }
  if (a.peak_kv_bytes != 0 && b.peak_kv_bytes != 0 && a.peak_kv_bytes != b.peak_kv_bytes) {
    out.emplace_back("peak_kv_bytes");
  }
  return out;
}

bool is_retryable_status(CellStatus status) {
  return status == CellStatus::oom || status == CellStatus::error;
}

}  // namespace kvaudit::records

// Host-side validation of a PrefillAttentionProblem (prefill_attention_checks.h).
#include "runners/cuda/attention/prefill_attention_checks.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvaudit::cuda {
namespace {

[[noreturn]] void fail(const char* backend, const std::string& what) {
  throw std::invalid_argument(std::string(backend) + ": PrefillAttentionProblem." + what);
}

bool aligned16(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

}  // namespace

void validate_prefill_attention(const PrefillAttentionProblem& problem, const char* backend) {
  const auto text = [](auto value) { return std::to_string(value); };
  if (problem.num_heads < 1)
    fail(backend, "num_heads = " + text(problem.num_heads) + " must be ≥ 1");
  if (problem.num_kv_heads < 1 || problem.num_heads % problem.num_kv_heads != 0) {
    fail(backend, "num_kv_heads = " + text(problem.num_kv_heads) +
                      " must be ≥ 1 and divide num_heads = " + text(problem.num_heads));
  }
  if (problem.head_dim < 16 || problem.head_dim > 256 || problem.head_dim % 16 != 0) {
    fail(backend,
         "head_dim = " + text(problem.head_dim) + " must be a multiple of 16 in [16, 256]");
  }
  const DeviceSequenceKv& kv = problem.sequence;
  if (kv.num_kv_heads != problem.num_kv_heads) {
    fail(backend, "sequence.num_kv_heads = " + text(kv.num_kv_heads) +
                      " differs from num_kv_heads = " + text(problem.num_kv_heads));
  }
  if (kv.head_dim != problem.head_dim) {
    fail(backend, "sequence.head_dim = " + text(kv.head_dim) +
                      " differs from head_dim = " + text(problem.head_dim));
  }
  if (kv.capacity < 1) fail(backend, "sequence.capacity = " + text(kv.capacity) + " must be ≥ 1");
  if (kv.keys == nullptr || kv.values == nullptr || kv.positions == nullptr ||
      kv.lengths == nullptr) {
    fail(backend, "sequence has a null keys, values, positions or lengths pointer");
  }
  if (problem.layer < 0) fail(backend, "layer = " + text(problem.layer) + " must be ≥ 0");
  if (!std::isfinite(problem.scale) || problem.scale <= 0.0f) {
    fail(backend, "scale = " + text(problem.scale) + " must be finite and > 0");
  }
  if (problem.rows < 1) fail(backend, "rows = " + text(problem.rows) + " must be ≥ 1");
  if (problem.queries == nullptr || problem.query_positions == nullptr || problem.out == nullptr) {
    fail(backend, "queries, query_positions or out is null");
  }
  if (!aligned16(problem.queries) || !aligned16(problem.out) || !aligned16(kv.keys) ||
      !aligned16(kv.values)) {
    fail(backend, "queries, out, sequence.keys and sequence.values must be 16-byte aligned");
  }
  if (problem.kv_lengths.size() != static_cast<std::size_t>(problem.num_kv_heads)) {
    fail(backend, "kv_lengths has " + text(problem.kv_lengths.size()) +
                      " entries, expected num_kv_heads = " + text(problem.num_kv_heads));
  }
  for (std::size_t h = 0; h < problem.kv_lengths.size(); ++h) {
    const std::int32_t length = problem.kv_lengths[h];
    if (length < problem.rows || length > kv.capacity) {
      fail(backend, "kv_lengths[" + text(h) + "] = " + text(length) + " must lie in [rows = " +
                        text(problem.rows) + ", sequence.capacity = " + text(kv.capacity) +
                        "] (the rows' own keys are already in the cache)");
    }
  }
  if (problem.first_query_position < 0) {
    fail(backend, "first_query_position = " + text(problem.first_query_position) + " must be ≥ 0");
  }
  const std::int64_t span = static_cast<std::int64_t>(problem.last_query_position) -
                            static_cast<std::int64_t>(problem.first_query_position) + 1;
  if (span != problem.rows) {
    fail(backend, "first_query_position = " + text(problem.first_query_position) +
                      " and last_query_position = " + text(problem.last_query_position) +
                      " do not span rows = " + text(problem.rows) + " consecutive positions");
  }
}

std::int64_t visible_entries(const PrefillAttentionProblem& problem, int kv_head,
                             std::int32_t query_position) {
  const std::int64_t length = problem.kv_lengths[static_cast<std::size_t>(kv_head)];
  return length - (static_cast<std::int64_t>(problem.last_query_position) - query_position);
}

}  // namespace kvaudit::cuda

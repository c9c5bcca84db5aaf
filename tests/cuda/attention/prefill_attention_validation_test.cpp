// Host-side validation of the prefill attention entry points (prefill_attention_checks.h): bad
// problems throw std::invalid_argument naming the field before anything touches the GPU, so these
// tests need no device. Device "pointers" here are aligned host addresses that are never read.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runners/cuda/attention/prefill_attention.h"

namespace kvaudit::cuda::test {
namespace {

// A valid problem shape (H = 4, Hkv = 2, T = 8 rows at positions 8..15, 16 cached entries per
// head) over placeholder pointers.
struct PlaceholderProblem {
  alignas(16) std::uint8_t storage[64] = {};
  std::vector<std::int32_t> lengths{16, 16};
  PrefillAttentionProblem problem;

  explicit PlaceholderProblem(int head_dim) {
    auto* bf16_pointer = reinterpret_cast<__nv_bfloat16*>(storage);
    auto* int_pointer = reinterpret_cast<std::int32_t*>(storage);
    problem.sequence.keys = bf16_pointer;
    problem.sequence.values = bf16_pointer;
    problem.sequence.positions = int_pointer;
    problem.sequence.lengths = int_pointer;
    problem.sequence.num_kv_heads = 2;
    problem.sequence.head_dim = head_dim;
    problem.sequence.capacity = 32;
    problem.layer = 0;
    problem.num_heads = 4;
    problem.num_kv_heads = 2;
    problem.head_dim = head_dim;
    problem.scale = 0.125f;
    problem.rows = 8;
    problem.queries = bf16_pointer;
    problem.query_positions = int_pointer;
    problem.kv_lengths = lengths;
    problem.first_query_position = 8;
    problem.last_query_position = 15;
    problem.out = bf16_pointer;
  }
};

// Runs `call`, expecting std::invalid_argument whose message contains `fragment`.
template <typename Call>
void expect_invalid(Call call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected std::invalid_argument mentioning '" << fragment << "'";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

void expect_both_invalid(const PrefillAttentionProblem& problem, const std::string& fragment) {
  expect_invalid([&] { prefill_attention_sdpa(problem, nullptr); }, fragment);
  EagerWorkspace workspace(0);
  expect_invalid([&] { prefill_attention_eager(problem, workspace, nullptr, nullptr); }, fragment);
}

TEST(PrefillAttentionValidation, SdpaRejectsHeadDimsWithoutAKernel) {
  for (int dim : {32, 80, 96, 256}) {
    const PlaceholderProblem p(dim);
    expect_invalid([&] { prefill_attention_sdpa(p.problem, nullptr); },
                   "head_dim = " + std::to_string(dim));
  }
}

TEST(PrefillAttentionValidation, BothRejectHeadDimsOutsideTheContract) {
  for (int dim : {0, 8, 72, 272}) {
    const PlaceholderProblem p(dim);
    expect_both_invalid(p.problem, "head_dim");
  }
}

TEST(PrefillAttentionValidation, BothRejectInconsistentShapes) {
  {
    PlaceholderProblem p(64);
    p.problem.num_kv_heads = 3;
    expect_both_invalid(p.problem, "num_kv_heads");
  }
  {
    PlaceholderProblem p(64);
    p.problem.sequence.head_dim = 128;
    expect_both_invalid(p.problem, "sequence.head_dim");
  }
  {
    PlaceholderProblem p(64);
    p.lengths = {16, 16, 16};
    p.problem.kv_lengths = p.lengths;
    expect_both_invalid(p.problem, "kv_lengths has 3 entries");
  }
  {
    PlaceholderProblem p(64);
    p.lengths = {16, 7};  // fewer entries than the rows' own keys
    p.problem.kv_lengths = p.lengths;
    expect_both_invalid(p.problem, "kv_lengths[1] = 7");
  }
  {
    PlaceholderProblem p(64);
    p.lengths = {33, 16};  // beyond capacity
    p.problem.kv_lengths = p.lengths;
    expect_both_invalid(p.problem, "kv_lengths[0] = 33");
  }
  {
    PlaceholderProblem p(64);
    p.problem.last_query_position = 20;
    expect_both_invalid(p.problem, "last_query_position");
  }
  {
    PlaceholderProblem p(64);
    p.problem.rows = 0;
    expect_both_invalid(p.problem, "rows = 0");
  }
  {
    PlaceholderProblem p(64);
    p.problem.scale = 0.0f;
    expect_both_invalid(p.problem, "scale");
  }
}

TEST(PrefillAttentionValidation, BothRejectNullAndMisalignedPointers) {
  {
    PlaceholderProblem p(64);
    p.problem.out = nullptr;
    expect_both_invalid(p.problem, "null");
  }
  {
    PlaceholderProblem p(64);
    p.problem.queries = reinterpret_cast<const __nv_bfloat16*>(p.storage + 2);
    expect_both_invalid(p.problem, "16-byte aligned");
  }
}

TEST(PrefillAttentionValidation, EagerRejectsANullCublasHandle) {
  const PlaceholderProblem p(64);
  EagerWorkspace workspace(0);
  expect_invalid([&] { prefill_attention_eager(p.problem, workspace, nullptr, nullptr); },
                 "cuBLAS handle is null");
}

}  // namespace
}  // namespace kvaudit::cuda::test

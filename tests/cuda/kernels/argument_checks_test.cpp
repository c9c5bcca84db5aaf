// Host-side argument checks of the CUDA kernels (runners/cuda/kernels): a bad size throws
// std::invalid_argument naming the function and the argument before any CUDA call is made, so these
// tests run without a GPU (no pointer is dereferenced, no kernel launched).
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include "runners/cuda/kernels/kernels.h"
#include "runners/cuda/kernels/retain_kernels.h"

namespace kvaudit::cuda::test {
namespace {

void expect_invalid_argument(const std::function<void()>& call, const std::string& function,
                             const std::string& argument) {
  try {
    call();
    ADD_FAILURE() << function << " accepted an invalid " << argument;
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(function), std::string::npos) << message;
    EXPECT_NE(message.find(argument), std::string::npos) << message;
  }
}

TEST(CudaKernelArguments, DecodeAttentionRejectsBadShapes) {
  expect_invalid_argument(
      [] {
        decode_attention(nullptr, 1, 0, 9, 3, 48, 0.125f, AttentionNumerics::sdpa, nullptr, nullptr,
                         nullptr);
      },
      "decode_attention", "head_dim");
  expect_invalid_argument(
      [] {
        decode_attention(nullptr, 1, 0, 9, 2, 64, 0.125f, AttentionNumerics::eager, nullptr,
                         nullptr, nullptr);
      },
      "decode_attention", "num_kv_heads");
  expect_invalid_argument(
      [] {
        decode_attention(nullptr, 1, 0, 9, 3, 64, 0.0f, AttentionNumerics::eager, nullptr, nullptr,
                         nullptr);
      },
      "decode_attention", "scale");
  expect_invalid_argument(
      [] {
        decode_attention(nullptr, 2, 0, 9, 3, 64, 0.125f, AttentionNumerics::eager, nullptr,
                         nullptr, nullptr);
      },
      "decode_attention", "null pointer");
}

TEST(CudaKernelArguments, ElementwiseKernelsRejectBadSizes) {
  expect_invalid_argument([] { rms_norm(nullptr, nullptr, 2, 0, 1e-5f, nullptr, nullptr); },
                          "rms_norm", "hidden");
  expect_invalid_argument([] { embed_tokens(nullptr, 576, nullptr, -1, nullptr, nullptr); },
                          "embed_tokens", "rows");
  expect_invalid_argument([] { silu_mul(nullptr, 3, 0, nullptr, nullptr); }, "silu_mul", "inter");
  expect_invalid_argument([] { gather_rows(nullptr, nullptr, 1, 0, nullptr, nullptr); },
                          "gather_rows", "width");
  expect_invalid_argument([] { residual_add(nullptr, nullptr, 5, nullptr); }, "residual_add",
                          "null pointer");
  expect_invalid_argument([] { advance_lengths(nullptr, -1, 0, nullptr, nullptr); },
                          "advance_lengths", "num_sequences");
}

TEST(CudaKernelArguments, RopeSplitAppendRejectsOddHeadDim) {
  expect_invalid_argument(
      [] {
        rope_split_append(nullptr, 4, 9, 3, 63, nullptr, nullptr, nullptr, nullptr, nullptr,
                          nullptr, 0, nullptr, nullptr, nullptr);
      },
      "rope_split_append", "head_dim");
}

TEST(CudaKernelArguments, CompactKvCacheRejectsBadDescriptors) {
  DeviceSequenceKv sequence;
  expect_invalid_argument(
      [&] {
        compact_kv_cache(sequence, 0, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
      },
      "compact_kv_cache", "num_layers");
  expect_invalid_argument(
      [&] {
        compact_kv_cache(sequence, 2, nullptr, nullptr, 0, nullptr, nullptr, nullptr, nullptr);
      },
      "compact_kv_cache", "num_kv_heads");
}

}  // namespace
}  // namespace kvaudit::cuda::test

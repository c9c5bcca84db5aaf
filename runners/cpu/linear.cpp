// Linear layers and lm_head via OpenBLAS cblas_sgemm; see linear.h.
//
// Threads: the output features are split into one contiguous slice per OpenMP thread and each
// thread runs a single-threaded sgemm on its slice (OpenBLAS's own thread pool is not used; see
// use_single_threaded_openblas). One pool of threads for the whole forward pass: two pools (libgomp
// and OpenBLAS's pthreads) spin-waiting against each other made decoding several times slower.
// Every output element is still one sgemm dot product over the full input dimension, so results do
// not depend on the number of threads.
#include "runners/cpu/linear.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>

#include "runners/cpu/shape_check.h"

extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads(void);

namespace kvaudit::cpu {
namespace {

// Below this many multiply-adds a GEMM runs on one thread (fork/join would cost more).
constexpr double kParallelWork = 1 << 18;
// Slices are multiples of this many output features (whole sgemm register tiles).
constexpr int kSliceAlign = 64;

void finish_rows(float* y, std::size_t rows, std::size_t stride, std::size_t first,
                 std::size_t count, std::span<const float> bias, Rounding rounding) {
  if (bias.empty() && rounding == Rounding::none) return;
  for (std::size_t row = 0; row < rows; ++row) {
    float* yr = y + row * stride + first;
    if (!bias.empty()) {
      for (std::size_t o = 0; o < count; ++o) yr[o] += bias[first + o];
    }
    round_all(rounding, std::span<float>(yr, count));
  }
}

}  // namespace

void use_single_threaded_openblas() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void linear(std::span<const float> x, int rows, int in_features, std::span<const float> weight,
            int out_features, std::span<const float> bias, Rounding rounding, std::span<float> y) {
  const std::size_t r = static_cast<std::size_t>(rows);
  const std::size_t in = static_cast<std::size_t>(in_features);
  const std::size_t out = static_cast<std::size_t>(out_features);
  require_size(x, r * in, "linear: x");
  require_size(weight, out * in, "linear: weight");
  require_size(y, r * out, "linear: y");
  if (!bias.empty()) require_size(bias, out, "linear: bias");
  if (rows == 0 || out_features == 0) return;

  const double work = static_cast<double>(rows) * in_features * out_features;
  int threads = omp_in_parallel() || work < kParallelWork ? 1 : omp_get_max_threads();
  threads = std::max(1, std::min(threads, (out_features + kSliceAlign - 1) / kSliceAlign));
  const int slice =
      ((out_features + threads - 1) / threads + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    const int first = t * slice;
    const int count = std::min(slice, out_features - first);
    if (count <= 0) continue;
    // Row-major C[rows, count] = A[rows, in] · B[count, in]ᵀ, written into y's columns.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, count, in_features, 1.0f, x.data(),
                in_features, weight.data() + static_cast<std::size_t>(first) * in, in_features,
                0.0f, y.data() + first, out_features);
    finish_rows(y.data(), r, out, static_cast<std::size_t>(first), static_cast<std::size_t>(count),
                bias, rounding);
  }
}

void lm_head(std::span<const float> hidden, int rows, int hidden_size,
             std::span<const float> output_projection, int vocab, Rounding rounding,
             std::span<float> logits) {
  linear(hidden, rows, hidden_size, output_projection, vocab, {}, rounding, logits);
}

}  // namespace kvaudit::cpu

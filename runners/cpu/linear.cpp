// Linear layers and lm_head via OpenBLAS cblas_sgemm; see linear.h.
//
// Threads: the output features are split into one contiguous slice per OpenMP thread and each
// thread runs a single-threaded sgemm on its slice (OpenBLAS's own thread pool is not used; see
// use_single_threaded_openblas). One pool of threads for the whole forward pass: two pools (libgomp
// and OpenBLAS's pthreads) spin-waiting against each other made decoding several times slower.
// Every output element is still one sgemm dot product over the full input dimension, so results do
// not depend on the number of threads.
//
// Row invariance: OpenBLAS 0.3.21 (x86_64, SMALL_MATRIX_OPT) sends small products (M·N·K up to
// about 10⁶, shape-dependent) to its small-matrix kernels, which order the sums differently from
// the blocked kernel: row 0's outputs for M = 1 differ in the last bits from the same row computed
// among M = 4 or 16 rows (measured for SmolLM2's 576×576 and 1536→576 projections). A sequence
// decoded alone (run_unit_naive, kvpress's batch size 1) and decoded in a batch of cells (the
// fan-out) then diverge at greedy near-ties. So a call whose product could be small is padded with
// zero rows until M·N·K exceeds kSmallProduct: every row then goes through the blocked kernel,
// whose result for a row does not depend on M (tests/cpu_runtime/linear_row_invariance_test.cpp).
#include "runners/cpu/linear.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "runners/cpu/linear_slices.h"
#include "runners/cpu/shape_check.h"

extern "C" void openblas_set_num_threads(int num_threads);
extern "C" int openblas_get_num_threads(void);

namespace kvaudit::cpu {
namespace {

// Below this many multiply-adds a GEMM runs on one thread (fork/join would cost more).
constexpr double kParallelWork = 1 << 18;
// Above this M·N·K OpenBLAS never takes its small-matrix path (its permit functions' bound); calls
// at or below it are padded with zero rows just past it. Larger calls (lm_head, prefills) run as
// they are: the blocked kernel's rows do not depend on M.
constexpr double kSmallProduct = 1e6;

// Rows to compute for `rows` real ones against a slice of `count` outputs (row invariance above).
int padded_rows(int rows, int count, int in_features) {
  const double per_row = static_cast<double>(count) * static_cast<double>(in_features);
  if (static_cast<double>(rows) * per_row > kSmallProduct) return rows;
  return std::max(rows, static_cast<int>(kSmallProduct / per_row) + 1);
}

}  // namespace

void finish_linear_rows(float* y, std::size_t rows, std::size_t stride, std::size_t first,
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

OutputSlices output_slices(int rows, int in_features, int out_features) {
  const double work = static_cast<double>(rows) * in_features * out_features;
  int threads = omp_in_parallel() || work < kParallelWork ? 1 : omp_get_max_threads();
  threads = std::max(1, std::min(threads, (out_features + kSliceAlign - 1) / kSliceAlign));
  const int slice =
      ((out_features + threads - 1) / threads + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  return {threads, slice};
}

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

  for_each_output_slice(
      y.data(), rows, in_features, out_features, bias, rounding, [&](int first, int count) {
        // Row-major C[rows, count] = A[rows, in] · B[count, in]ᵀ, written into y's columns.
        const float* w = weight.data() + static_cast<std::size_t>(first) * in;
        const int padded = padded_rows(rows, count, in_features);
        if (padded == rows) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, count, in_features, 1.0f,
                      x.data(), in_features, w, in_features, 0.0f, y.data() + first, out_features);
        } else {
          const std::size_t p = static_cast<std::size_t>(padded);
          // Per-thread scratch, reused across calls (decoding calls this for every projection).
          thread_local std::vector<float> xp, yp;
          xp.assign(p * in, 0.0f);
          yp.resize(p * static_cast<std::size_t>(count));
          std::copy(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(r * in), xp.begin());
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, padded, count, in_features, 1.0f,
                      xp.data(), in_features, w, in_features, 0.0f, yp.data(), count);
          for (std::size_t row = 0; row < r; ++row) {
            std::copy_n(yp.data() + row * static_cast<std::size_t>(count), count,
                        y.data() + row * out + static_cast<std::size_t>(first));
          }
        }
      });
}

void lm_head(std::span<const float> hidden, int rows, int hidden_size,
             std::span<const float> output_projection, int vocab, Rounding rounding,
             std::span<float> logits) {
  linear(hidden, rows, hidden_size, output_projection, vocab, {}, rounding, logits);
}

}  // namespace kvaudit::cpu

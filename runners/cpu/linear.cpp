// Linear layers, lm_head and the general product in the canonical order; see linear.h and
// gemm_driver.h. Threads split the output features (linear_slices.h); within a thread the outputs
// run through gemm_driver.h's blocks with the active level's register tiles (gemm_tiles.h).
#include "runners/cpu/linear.h"

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "runners/cpu/cpu_isa.h"
#include "runners/cpu/gemm_driver.h"
#include "runners/cpu/linear_slices.h"
#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {
namespace {

using tiles::kBlock;
using tiles::kPanelOutputs;
using tiles::PanelView;

// Below this many multiply-adds a GEMM runs on one thread (fork/join would cost more).
constexpr double kParallelWork = 1 << 18;

// Weights of outputs o … o+63, steps s0 … s0+sc−1 of op(B) into `panel` [sc][64] (zero past
// `outputs`); element (s, j) is b[(s0 + s)·step_stride + (o + j)·output_stride].
PanelView pack_panel(const float* b, std::size_t step_stride, std::size_t output_stride, int o,
                     int outputs, int s0, int sc, std::vector<float>& panel) {
  panel.assign(static_cast<std::size_t>(sc) * kPanelOutputs, 0.0f);
  for (int j = 0; j < outputs; ++j) {
    const float* column = b + static_cast<std::size_t>(o + j) * output_stride +
                          static_cast<std::size_t>(s0) * step_stride;
    float* out = panel.data() + j;
    for (int s = 0; s < sc; ++s)
      out[static_cast<std::size_t>(s) * kPanelOutputs] =
          column[static_cast<std::size_t>(s) * step_stride];
  }
  return {panel.data(), kBlock, kPanelOutputs, nullptr};
}

void check_linear_shapes(std::span<const float> x, int rows, int in_features, int out_features,
                         std::span<const float> bias, std::span<float> y) {
  if (rows < 0 || in_features < 0 || out_features < 0) {
    throw std::invalid_argument("linear: negative shape (rows " + std::to_string(rows) + ", in " +
                                std::to_string(in_features) + ", out " +
                                std::to_string(out_features) + ")");
  }
  const std::size_t r = static_cast<std::size_t>(rows);
  require_size(x, r * static_cast<std::size_t>(in_features), "linear: x");
  require_size(y, r * static_cast<std::size_t>(out_features), "linear: y");
  if (!bias.empty()) require_size(bias, static_cast<std::size_t>(out_features), "linear: bias");
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

PackedF32Weight::PackedF32Weight(std::span<const float> weight, int out_features, int in_features,
                                 std::string_view name)
    : out_features_(out_features), in_features_(in_features) {
  const std::string what(name);
  require_weight_shape(weight, out_features, in_features, what);
  const std::size_t out = static_cast<std::size_t>(out_features);
  const std::size_t in = static_cast<std::size_t>(in_features);
  const std::size_t blocks = (out + kBlock - 1) / kBlock;
  storage_.assign(blocks * in * kBlock, 0.0f);
#pragma omp parallel for schedule(static) if (out * in > (std::size_t{1} << 20))
  for (std::size_t block = 0; block < blocks; ++block) {
    float* packed = storage_.data() + block * in * kBlock;
    for (std::size_t lane = 0; lane < kBlock && block * kBlock + lane < out; ++lane) {
      const float* row = weight.data() + (block * kBlock + lane) * in;
      for (std::size_t k = 0; k < in; ++k) packed[k * kBlock + lane] = row[k];
    }
  }
}

void linear(std::span<const float> x, int rows, int in_features, std::span<const float> weight,
            int out_features, std::span<const float> bias, Rounding rounding, std::span<float> y) {
  check_linear_shapes(x, rows, in_features, out_features, bias, y);
  require_size(weight,
               static_cast<std::size_t>(out_features) * static_cast<std::size_t>(in_features),
               "linear: weight");
  if (rows == 0 || out_features == 0) return;
  const tiles::TileKernel& kernel = tiles::tile_kernel(active_cpu_isa());
  const std::size_t in = static_cast<std::size_t>(in_features);
  for_each_output_slice(
      y.data(), rows, in_features, out_features, bias, rounding, [&](int first, int count) {
        thread_local std::vector<float> panel;
        tiles::run_tiles(kernel, x.data(), in, rows, in_features, first, count, y.data(),
                         static_cast<std::size_t>(out_features), [&](int o, int s0, int sc) {
                           return pack_panel(weight.data(), 1, in, o,
                                             std::min(kPanelOutputs, out_features - o), s0, sc,
                                             panel);
                         });
      });
}

void linear(std::span<const float> x, int rows, int in_features, const PackedF32Weight& weight,
            std::span<const float> bias, Rounding rounding, std::span<float> y) {
  if (in_features != weight.in_features()) {
    throw std::invalid_argument("linear: x has " + std::to_string(in_features) +
                                " features, the packed weight takes " +
                                std::to_string(weight.in_features()));
  }
  const int out_features = weight.out_features();
  check_linear_shapes(x, rows, in_features, out_features, bias, y);
  if (rows == 0 || out_features == 0) return;
  const tiles::TileKernel& kernel = tiles::tile_kernel(active_cpu_isa());
  const std::size_t in = static_cast<std::size_t>(in_features);
  for_each_output_slice(
      y.data(), rows, in_features, out_features, bias, rounding, [&](int first, int count) {
        tiles::run_tiles(kernel, x.data(), in, rows, in_features, first, count, y.data(),
                         static_cast<std::size_t>(out_features), [&](int o, int s0, int) {
                           const float* w = weight.data() + static_cast<std::size_t>(o) * in +
                                            static_cast<std::size_t>(s0) * kBlock;
                           return PanelView{w, in * kBlock, kBlock, nullptr};
                         });
      });
}

void lm_head(std::span<const float> hidden, int rows, int hidden_size,
             std::span<const float> output_projection, int vocab, Rounding rounding,
             std::span<float> logits) {
  linear(hidden, rows, hidden_size, output_projection, vocab, {}, rounding, logits);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, bool accumulate, float* c, int ldc) {
  if (m < 0 || n < 0 || k < 0) throw std::invalid_argument("gemm: negative shape");
  if (m == 0 || n == 0) return;
  const std::size_t mm = static_cast<std::size_t>(m), nn = static_cast<std::size_t>(n),
                    kk = static_cast<std::size_t>(k);
  // op(A) as rows of k contiguous floats.
  std::vector<float> a_rows;
  const float* x = a;
  std::size_t x_stride = static_cast<std::size_t>(lda);
  if (trans_a) {
    a_rows.resize(mm * kk);
    for (std::size_t l = 0; l < kk; ++l) {
      for (std::size_t i = 0; i < mm; ++i)
        a_rows[i * kk + l] = a[l * static_cast<std::size_t>(lda) + i];
    }
    x = a_rows.data();
    x_stride = kk;
  }
  std::vector<float> product(mm * nn);
  const tiles::TileKernel& kernel = tiles::tile_kernel(active_cpu_isa());
  // op(B)[l][j] = b[l·ldb + j], or b[j·ldb + l] when transposed.
  const std::size_t step_stride = trans_b ? 1 : static_cast<std::size_t>(ldb);
  const std::size_t output_stride = trans_b ? static_cast<std::size_t>(ldb) : 1;
  const OutputSlices slices = output_slices(m, k, n);
  const int threads = slices.threads;
  const int slice = slices.slice;
#pragma omp parallel for schedule(static, 1) num_threads(threads) if (threads > 1)
  for (int t = 0; t < threads; ++t) {
    const int first = t * slice;
    const int count = std::min(slice, n - first);
    if (count <= 0) continue;
    thread_local std::vector<float> panel;
    tiles::run_tiles(kernel, x, x_stride, m, k, first, count, product.data(), nn,
                     [&](int o, int s0, int sc) {
                       return pack_panel(b, step_stride, output_stride, o,
                                         std::min(kPanelOutputs, n - o), s0, sc, panel);
                     });
  }
  for (std::size_t i = 0; i < mm; ++i) {
    float* ci = c + i * static_cast<std::size_t>(ldc);
    const float* pi = product.data() + i * nn;
    for (std::size_t j = 0; j < nn; ++j) {
      const float value = alpha == 1.0f ? pi[j] : alpha * pi[j];
      ci[j] = accumulate ? ci[j] + value : value;
    }
  }
}

}  // namespace kvaudit::cpu

// linear() gives a row the same bits whatever number of rows it is computed with and whatever the
// thread count (runners/cpu/linear.h: one fma chain per output, threads and tiles split outputs
// only): otherwise a sequence decoded alone would differ from the same sequence decoded in a batch.
// The shapes are SmolLM2's projections (576 → 576, 1536 → 576, 576 → 1536), a tiny model's
// (64 → 64, 64 → 256) and a large one (576 → 8192, like lm_head).
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runners/cpu/linear.h"

namespace kvaudit::cpu {
namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(LinearRowInvariance, ARowsOutputsDoNotDependOnTheRowCountOrTheThreads) {
  const int shapes[][2] = {{64, 64}, {64, 256}, {576, 576}, {1536, 576}, {576, 1536}, {576, 8192}};
  for (const auto& shape : shapes) {
    const int in = shape[0], out = shape[1];
    const std::vector<float> x = random_values(static_cast<std::size_t>(64 * in), 1);
    const std::vector<float> w = random_values(static_cast<std::size_t>(out * in), 2);
    std::vector<float> reference(static_cast<std::size_t>(64 * out));
    linear(x, 64, in, w, out, {}, Rounding::none, reference);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      for (int rows : {1, 2, 3, 4, 5, 8, 16, 17, 33}) {
        std::vector<float> y(static_cast<std::size_t>(rows * out));
        linear(std::span<const float>(x.data(), static_cast<std::size_t>(rows * in)), rows, in, w,
               out, {}, Rounding::none, y);
        int differing = 0;
        for (std::size_t i = 0; i < y.size(); ++i) {
          if (std::memcmp(&y[i], &reference[i], sizeof(float)) != 0) ++differing;
        }
        EXPECT_EQ(differing, 0) << in << " -> " << out << ", " << rows << " rows, " << threads
                                << " threads: outputs differ from the same rows among 64";
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

}  // namespace
}  // namespace kvaudit::cpu

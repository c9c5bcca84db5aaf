// The CPU engine's GEMMs (runners/cpu/linear.h, linear_bf16.h: one fma chain per output, the same
// bits at every level) against OpenBLAS's cblas_sgemm (single-threaded, as the engine used it
// before) on the shapes the engine runs: SmolLM2-135M's projections and lm_head, and
// Llama-3.1-8B's (hidden 4096, intermediate 14336, 8 KV heads × 128), for 1 row (a decode step)
// and 512 rows (a prefill chunk). One thread (OMP_NUM_THREADS=1 is set here), so the numbers are
// the kernels', not the thread split's. Counter GFLOPS = 2·rows·in·out per second.
//   BM_Engine/<f32|bf16>/rows:R/in:K/out:N    kvaudit's linear (packed weights) or linear_bf16
//   BM_OpenBlas/rows:R/in:K/out:N             cblas_sgemm(RowMajor, NoTrans, Trans), f32
// The level is KVAUDIT_CPU_ISA's (default: the CPU's best); OpenBLAS's kernel set is its own
// choice for this CPU (printed as openblas_core; compare rows only where it matches the level).
// docs/PERFORMANCE.md:  build/bench/bench_gemm --benchmark_min_time=0.3
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runners/cpu/cpu_isa.h"
#include "runners/cpu/linear.h"
#include "runners/cpu/linear_bf16.h"
#include "runners/model/bf16.h"

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using kvaudit::cpu::Rounding;

std::vector<float> values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> v(n);
  for (float& x : v) x = kvaudit::model::round_to_bf16(normal(rng));
  return v;
}

void set_flops(benchmark::State& state, int rows, int in, int out) {
  state.counters["GFLOPS"] =
      benchmark::Counter(2.0 * rows * in * out * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

void BM_Engine(benchmark::State& state) {
  const bool bf16 = state.range(0) != 0;
  const int rows = static_cast<int>(state.range(1)), in = static_cast<int>(state.range(2)),
            out = static_cast<int>(state.range(3));
  const std::vector<float> x = values(static_cast<std::size_t>(rows) * in, 1);
  const std::vector<float> w = values(static_cast<std::size_t>(out) * in, 2);
  std::vector<float> y(static_cast<std::size_t>(rows) * out);
  if (bf16) {
    const kvaudit::cpu::PackedBf16Weight packed(w, out, in, "w");
    for (auto _ : state) {
      kvaudit::cpu::linear_bf16(x, rows, in, packed, {}, Rounding::bf16, y);
      benchmark::DoNotOptimize(y.data());
    }
  } else {
    const kvaudit::cpu::PackedF32Weight packed(w, out, in, "w");
    for (auto _ : state) {
      kvaudit::cpu::linear(x, rows, in, packed, {}, Rounding::none, y);
      benchmark::DoNotOptimize(y.data());
    }
  }
  set_flops(state, rows, in, out);
}

void BM_OpenBlas(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0)), in = static_cast<int>(state.range(1)),
            out = static_cast<int>(state.range(2));
  const std::vector<float> x = values(static_cast<std::size_t>(rows) * in, 1);
  const std::vector<float> w = values(static_cast<std::size_t>(out) * in, 2);
  std::vector<float> y(static_cast<std::size_t>(rows) * out);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x.data(), in,
                w.data(), in, 0.0f, y.data(), out);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, rows, in, out);
}

// {in, out}: SmolLM2-135M (q/o 576×576, k/v 576→192, gate/up 576→1536, down 1536→576, lm_head
// 576→49152) and Llama-3.1-8B (q/o 4096², k/v 4096→1024, gate/up 4096→14336, down 14336→4096).
const int kShapes[][2] = {{576, 576},   {576, 192},   {576, 1536},   {1536, 576},  {576, 49152},
                          {4096, 4096}, {4096, 1024}, {4096, 14336}, {14336, 4096}};

void engine_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bf16", "rows", "in", "out"});
  for (const int bf16 : {0, 1}) {
    for (const int rows : {1, 512}) {
      for (const auto& s : kShapes) b->Args({bf16, rows, s[0], s[1]});
    }
  }
}

void openblas_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "in", "out"});
  for (const int rows : {1, 512}) {
    for (const auto& s : kShapes) b->Args({rows, s[0], s[1]});
  }
}

BENCHMARK(BM_Engine)->Apply(engine_arguments)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenBlas)->Apply(openblas_arguments)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(1);
  openblas_set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu_isa", kvaudit::cpu::describe_active_cpu_isa());
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

// Benchmarks of statistics/: the paired bootstrap (B = 50,000 by default) for one comparison at
// n = 1200, a stratified comparison of 13 tasks × 100 instances, and the batched API with 100
// comparisons sharing the same 13 × 100 strata (indices drawn once per replicate and stratum);
// 0/1 utilities (exact integer path) and [0, 1] scores (double path); threads = 1 and 2.
// Also K* and a Clopper–Pearson interval for scale.
//
//   build/bench/bench_statistics --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "statistics/binomial.h"
#include "statistics/clopper_pearson.h"
#include "statistics/paired_bootstrap.h"
#include "statistics/rng.h"

namespace {

using namespace kvaudit::stats;

constexpr std::int64_t kResamples = 50000;

// A deterministic comparison over `tasks` strata of `per_task` instances.
PairedComparison make_comparison(std::uint32_t seed, std::uint32_t tasks, std::uint32_t per_task,
                                 bool binary) {
  PairedComparison c;
  c.name = "comparison " + std::to_string(seed);
  std::uint32_t word = 0;
  const auto next = [&] {
    const auto w = philox_words(seed, 0, word / 2, 0, RandomPurpose::simulation)[word % 2];
    ++word;
    return unit_double(w);
  };
  for (std::uint32_t t = 0; t < tasks; ++t) {
    PairedStratum s;
    s.id = t;
    for (std::uint32_t i = 0; i < per_task; ++i) {
      s.arm_a.push_back(binary ? (next() < 0.6 ? 1.0 : 0.0) : next());
      s.arm_b.push_back(binary ? (next() < 0.5 ? 1.0 : 0.0) : next());
    }
    c.strata.push_back(std::move(s));
  }
  return c;
}

void run_batch(benchmark::State& state, const std::vector<PairedComparison>& batch) {
  BootstrapOptions options;
  options.resamples = kResamples;
  options.threads = static_cast<int>(state.range(0));
  std::int64_t instances = 0;
  for (const auto& c : batch) {
    for (const auto& s : c.strata) instances += static_cast<std::int64_t>(s.arm_a.size());
  }
  for (auto _ : state) {
    auto results = paired_bootstrap_batch(batch, options);
    benchmark::DoNotOptimize(results);
  }
  state.counters["comparisons"] = static_cast<double>(batch.size());
  state.counters["gathers/s"] = benchmark::Counter(
      static_cast<double>(instances) * kResamples * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

void BM_OneComparison_n1200_Binary(benchmark::State& state) {
  run_batch(state, {make_comparison(1, 1, 1200, true)});
}
void BM_OneComparison_n1200_Scores(benchmark::State& state) {
  run_batch(state, {make_comparison(2, 1, 1200, false)});
}
void BM_Stratified_13x100_Binary(benchmark::State& state) {
  run_batch(state, {make_comparison(3, 13, 100, true)});
}
void BM_Batch_100Comparisons_13x100_Binary(benchmark::State& state) {
  std::vector<PairedComparison> batch;
  for (std::uint32_t c = 0; c < 100; ++c) batch.push_back(make_comparison(10 + c, 13, 100, true));
  run_batch(state, batch);
}
void BM_Batch_100Comparisons_13x100_Scores(benchmark::State& state) {
  std::vector<PairedComparison> batch;
  for (std::uint32_t c = 0; c < 100; ++c) batch.push_back(make_comparison(10 + c, 13, 100, false));
  run_batch(state, batch);
}

BENCHMARK(BM_OneComparison_n1200_Binary)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_OneComparison_n1200_Scores)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Stratified_13x100_Binary)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Batch_100Comparisons_13x100_Binary)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Batch_100Comparisons_13x100_Scores)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_KStar_n10000(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(max_certifiable_violations(10000, 0.05, 0.05));
}
BENCHMARK(BM_KStar_n10000)->Unit(benchmark::kMicrosecond);

void BM_ClopperPearson(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(clopper_pearson_interval(29, 100, 0.05, {"accuracy", 13}));
  }
}
BENCHMARK(BM_ClopperPearson)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();

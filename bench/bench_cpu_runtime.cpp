// Benchmarks of the CPU reference backend (runners/cpu) on a real model:
//   BM_Prefill/bf16:<0|1>/sdpa:<0|1>/tokens:<n>  prefill of 512, 1024, 2048 tokens (logits of the
//                                                last token)
//   BM_Decode/bf16:<0|1>/sdpa:<0|1>/batch:<n>    decode steps for batch 1, 8, 32, each sequence on
//                                                top of its own 512-token prefilled context (16
//                                                steps per iteration)
// bf16:0 runs the model as loaded (f32); bf16:1 the same model cast to bf16
// (runners/model/formats/bf16_cast.h, transformers' torch_dtype=bfloat16), whose GEMMs run
// linear_bf16 (VDPBF16PS at the avx512bf16 level for small batches, fp32 FMA tiles otherwise).
// Counter `tokens_per_s` = tokens processed per wall-clock second (prefill: prompt tokens; decode:
// batch × steps). The model is read from $KVAUDIT_BENCH_MODEL (an HF directory or a .gguf file;
// default models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf, dequantized to f32).
//
//   build/bench/bench_cpu_runtime --benchmark_counters_tabular=true --benchmark_min_time=1
// Threads: OMP_NUM_THREADS (one OpenMP pool: attention, element-wise, and the GEMMs as per-thread
// slices); the instruction-set level is KVAUDIT_CPU_ISA's (runners/cpu/cpu_isa.h; same results).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runners/cpu/cpu_isa.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cpu/linear_bf16.h"
#include "runners/model/formats/bf16_cast.h"
#include "runners/model/formats/load_weights.h"

namespace {

using kvaudit::AttentionBackend;
using kvaudit::LogitRows;
using kvaudit::cpu::CpuModel;
using kvaudit::cpu::SequenceState;

constexpr int kDecodeContext = 512;
constexpr int kDecodeSteps = 16;

std::string model_path() {
  const char* env = std::getenv("KVAUDIT_BENCH_MODEL");
  return env != nullptr ? std::string(env)
                        : std::string(KVAUDIT_SOURCE_DIR) +
                              "/models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The model, loaded once (and its bf16 cast, made once when first asked for); the load error (if
// any) is reported by every benchmark.
struct LoadedModel {
  std::unique_ptr<kvaudit::model::ModelWeights> weights;
  std::string error;
};

const LoadedModel& loaded_f32_model() {
  static const LoadedModel model = [] {
    LoadedModel m;
    try {
      m.weights = std::make_unique<kvaudit::model::ModelWeights>(
          kvaudit::model::load_model_weights(model_path()));
    } catch (const std::exception& e) {
      m.error = "cannot load the benchmark model " + model_path() +
                " (set KVAUDIT_BENCH_MODEL): " + e.what();
    }
    return m;
  }();
  return model;
}

const LoadedModel& loaded_bf16_model() {
  static const LoadedModel model = [] {
    const LoadedModel& f32 = loaded_f32_model();
    LoadedModel m;
    if (!f32.weights) {
      m.error = f32.error;
      return m;
    }
    m.weights = std::make_unique<kvaudit::model::ModelWeights>(*f32.weights);
    kvaudit::model::cast_weights_to_bf16(*m.weights);
    return m;
  }();
  return model;
}

const LoadedModel& loaded_model(const benchmark::State& state) {
  return state.range(0) == 0 ? loaded_f32_model() : loaded_bf16_model();
}

std::vector<std::int32_t> prompt_tokens(int count, int vocab, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_int_distribution<std::int32_t> dist(0, vocab - 1);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(count));
  for (auto& t : tokens) t = dist(engine);
  return tokens;
}

AttentionBackend backend_of(const benchmark::State& state) {
  return state.range(1) == 0 ? AttentionBackend::eager : AttentionBackend::sdpa;
}

void BM_Prefill(benchmark::State& state) {
  const LoadedModel& loaded = loaded_model(state);
  if (!loaded.weights) {
    state.SkipWithError(loaded.error.c_str());
    return;
  }
  CpuModel model(*loaded.weights, backend_of(state));
  const int tokens = static_cast<int>(state.range(2));
  const std::vector<std::int32_t> prompt = prompt_tokens(tokens, model.config().vocab_size, 1);
  for (auto _ : state) {
    SequenceState sequence = model.new_sequence();
    benchmark::DoNotOptimize(model.prefill(sequence, prompt, LogitRows::last));
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state) {
  const LoadedModel& loaded = loaded_model(state);
  if (!loaded.weights) {
    state.SkipWithError(loaded.error.c_str());
    return;
  }
  CpuModel model(*loaded.weights, backend_of(state));
  const int batch = static_cast<int>(state.range(2));
  const int vocab = model.config().vocab_size;
  std::vector<SequenceState> prefilled;
  for (int i = 0; i < batch; ++i) {
    prefilled.push_back(model.new_sequence());
    model.prefill(prefilled.back(), prompt_tokens(kDecodeContext, vocab, 100 + i), LogitRows::none);
  }
  const std::vector<std::int32_t> step_tokens = prompt_tokens(batch * kDecodeSteps, vocab, 7);
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<SequenceState> sequences = prefilled;  // every iteration starts at 512 tokens
    std::vector<SequenceState*> pointers;
    for (auto& s : sequences) pointers.push_back(&s);
    state.ResumeTiming();
    for (int step = 0; step < kDecodeSteps; ++step) {
      benchmark::DoNotOptimize(model.decode_step(
          pointers,
          std::span(step_tokens)
              .subspan(static_cast<std::size_t>(step * batch), static_cast<std::size_t>(batch))));
    }
  }
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(batch * kDecodeSteps), benchmark::Counter::kIsIterationInvariantRate);
}

void prefill_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bf16", "sdpa", "tokens"});
  for (int bf16 : {0, 1})
    for (int backend : {0, 1})
      for (int tokens : {512, 1024, 2048}) b->Args({bf16, backend, tokens});
}

void decode_arguments(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bf16", "sdpa", "batch"});
  for (int bf16 : {0, 1})
    for (int backend : {0, 1})
      for (int batch : {1, 8, 32}) b->Args({bf16, backend, batch});
}

// (no MinTime here: --benchmark_min_time applies; docs/PERFORMANCE.md uses 1 or 2 seconds)
BENCHMARK(BM_Prefill)->Apply(prefill_arguments)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Decode)->Apply(decode_arguments)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu_isa", kvaudit::cpu::describe_active_cpu_isa());
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("model", model_path());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

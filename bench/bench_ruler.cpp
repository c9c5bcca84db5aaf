// Google Benchmark: RULER generation throughput (instances/s) per task at 4K and 8K tokens with
// SmolLM2-135M's byte-level BPE (the embedded GGUF; the benchmark reports an error when absent).
// Each iteration generates one new instance index (probe search excluded: the generator is built
// and warmed once per task), so the rate includes the per-instance length search and measurement.
// Results belong in docs/PERFORMANCE.md, never in tests.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>

#include "runners/model/tokenizer/tokenizer.h"
#include "suite/benchmarks/ruler/prompt_measure.h"
#include "suite/benchmarks/ruler/ruler_generator.h"

namespace {

using namespace kvaudit::benchmarks::ruler;

const std::filesystem::path kSource = KVAUDIT_SOURCE_DIR;
const std::filesystem::path kSmolLm =
    kSource / "models" / "smollm2-135m-instruct" / "SmolLM2-135M-Instruct.Q4_1.gguf";

void BM_RulerGenerate(benchmark::State& state, const char* task) {
  if (!std::filesystem::exists(kSmolLm)) {
    state.SkipWithError("SmolLM2 GGUF absent (tools/fetch_default_model.sh fetches it)");
    return;
  }
  static const auto tokenizer = kvaudit::model::load_tokenizer(kSmolLm);
  const PromptMeasurer measurer(*tokenizer, kvaudit::model::ChatTemplateKind::none);
  RulerConfig config;
  config.length = state.range(0);
  config.squad = (kSource / "data" / "ruler" / "squad_v2_sample.json").string();
  config.hotpotqa = (kSource / "data" / "ruler" / "hotpotqa_sample.json").string();
  RulerGenerator generator(config, measurer);
  generator.generate(task, 0);  // warm: data loading and the per-task probe
  std::int64_t index = 1;
  std::int64_t tokens = 0;
  for (auto _ : state) {
    const auto instance = generator.generate(task, index++);
    tokens += instance.prompt_tokens();
    benchmark::DoNotOptimize(instance.context.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["prompt_tokens/s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

#define KVAUDIT_RULER_BENCH(task)                  \
  BENCHMARK_CAPTURE(BM_RulerGenerate, task, #task) \
      ->Arg(4096)                                  \
      ->Arg(8192)                                  \
      ->Unit(benchmark::kMillisecond)

KVAUDIT_RULER_BENCH(niah_single_1);
KVAUDIT_RULER_BENCH(niah_single_2);
KVAUDIT_RULER_BENCH(niah_single_3);
KVAUDIT_RULER_BENCH(niah_multikey_1);
KVAUDIT_RULER_BENCH(niah_multikey_2);
KVAUDIT_RULER_BENCH(niah_multikey_3);
KVAUDIT_RULER_BENCH(niah_multivalue);
KVAUDIT_RULER_BENCH(niah_multiquery);
KVAUDIT_RULER_BENCH(vt);
KVAUDIT_RULER_BENCH(cwe);
KVAUDIT_RULER_BENCH(fwe);
KVAUDIT_RULER_BENCH(qa_1);
KVAUDIT_RULER_BENCH(qa_2);

}  // namespace

BENCHMARK_MAIN();

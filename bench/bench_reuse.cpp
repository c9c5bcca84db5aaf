// Benchmark of the reuse protocol (docs/design/reuse.md): one reuse unit of a context and its 4
// questions (one prefill, one selection and one eviction per cell, a fork per question) against
// the 4 query-agnostic units {context, question j} the same study would run without it (a
// prefill and a selection per question), over the same cells: 3 methods (knorm, snapkv,
// expected_attention) × 2 compressions {0.5, 0.9} + the full-KV cell. Both give cells × 4 records
// (the per-question results are identical: tests/unit_runner/reuse_fan_out_test.cpp); the
// counter records_per_cpu_hour = records / (wall seconds × OpenMP threads / 3600) compares them.
//
//   [KVAUDIT_CPU_ISA=avx2] OMP_WAIT_POLICY=passive build/bench/bench_reuse
//
// The model is $KVAUDIT_BENCH_MODEL, else the embedded SmolLM2 GGUF (the courier document of
// courier_unit.h at $KVAUDIT_BENCH_CONTEXT tokens, default 1024, with its four questions); when
// that file is absent, the tiny golden Llama (f32) on random tokens of the same shape.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/courier_unit.h"
#include "methods/method_factory.h"
#include "runners/cpu/cpu_isa.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/unit_runner.h"

namespace {

using kvaudit::Protocol;
using kvaudit::unit::CellSpec;
using kvaudit::unit::UnitResult;
using kvaudit::unit::UnitTokens;

constexpr int kNewTokens = 8;

int context_tokens() {
  const char* env = std::getenv("KVAUDIT_BENCH_CONTEXT");
  return env != nullptr ? std::max(64, std::atoi(env)) : 1024;
}

std::vector<std::int32_t> random_ids(int count, int vocab, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<std::int32_t> pick(3, vocab - 1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = pick(engine);
  return ids;
}

// The model, the reuse unit and the cells, loaded once for both benchmarks.
struct Setup {
  std::string model_name;
  kvaudit::model::ModelWeights weights;
  std::unique_ptr<kvaudit::cpu::CpuModel> model;
  UnitTokens reuse_unit;
  std::vector<std::unique_ptr<kvaudit::methods::Method>> methods;
  std::vector<CellSpec> reuse_cells;
  std::vector<CellSpec> agnostic_cells;

  Setup() {
    const std::string gguf = kvaudit::bench::bench_model_path();
    if (std::filesystem::exists(gguf)) {
      model_name = gguf;
      weights = kvaudit::model::load_model_weights(gguf);
      const auto tokenizer = kvaudit::model::load_tokenizer(gguf);
      reuse_unit = kvaudit::bench::make_courier_reuse_unit(*tokenizer, context_tokens());
      reuse_unit.question.clear();  // a reuse unit's questions are its reuse_questions
      reuse_unit.suffix.clear();
    } else {
      const std::filesystem::path tiny =
          std::filesystem::path(KVAUDIT_SOURCE_DIR) / "tests/golden/tiny_models/llama/f32";
      model_name = tiny.string() + " (" + gguf + " is absent)";
      weights = kvaudit::model::load_model_weights(tiny);
      const int vocab = weights.config.vocab_size;
      reuse_unit.context = random_ids(context_tokens(), vocab, 1);
      const int lengths[] = {10, 17, 13, 14};
      for (std::uint32_t j = 0; j < 4; ++j) {
        reuse_unit.reuse_questions.push_back({random_ids(lengths[j], vocab, 10 + j),
                                              random_ids(5 + static_cast<int>(j), vocab, 20 + j)});
      }
    }
    model = std::make_unique<kvaudit::cpu::CpuModel>(weights, kvaudit::AttentionBackend::eager);
    for (const char* id : {"knorm", "snapkv", "expected_attention"}) {
      methods.push_back(
          kvaudit::methods::make_method({.name = id, .id = id, .variant = "", .params = {}},
                                        [](const std::string&) { return nullptr; }));
    }
    std::uint64_t key = 1;
    reuse_cells.push_back({nullptr, {}, Protocol::reuse, key++});
    for (const auto& method : methods)
      for (double cr : {0.5, 0.9})
        reuse_cells.push_back({method.get(), {.compression = cr}, Protocol::reuse, key++});
    agnostic_cells = reuse_cells;
    for (CellSpec& cell : agnostic_cells) cell.protocol = Protocol::query_agnostic;
  }

  UnitTokens single_question_unit(std::size_t j) const {
    UnitTokens single;
    single.context = reuse_unit.context;
    single.question = reuse_unit.reuse_questions[j].question;
    single.suffix = reuse_unit.reuse_questions[j].suffix;
    single.pass_prompt = reuse_unit.pass_prompt;
    return single;
  }

  kvaudit::unit::UnitRunOptions options() const {
    kvaudit::unit::UnitRunOptions o;
    o.decode.max_new_tokens = kNewTokens;  // no stop ids: every row decodes them all
    o.seed = 1;
    return o;
  }
};

Setup& setup() {
  static Setup instance;
  return instance;
}

// records = cells × questions per iteration; CPU-hour = wall × threads.
void set_counters(benchmark::State& state, double wall_seconds, std::size_t records,
                  std::size_t failed) {
  const double threads = static_cast<double>(omp_get_max_threads());
  const double iterations = static_cast<double>(state.iterations());
  state.counters["records"] = static_cast<double>(records);
  state.counters["failed"] = static_cast<double>(failed);
  state.counters["threads"] = threads;
  state.counters["records_per_cpu_hour"] =
      static_cast<double>(records) * iterations / (wall_seconds * threads / 3600.0);
}

std::size_t count_failed(const UnitResult& result) {
  std::size_t failed = 0;
  for (const auto& cell : result.cells)
    failed += cell.status == kvaudit::unit::CellStatus::ok ? 0 : 1;
  return failed;
}

void BM_ReuseUnit(benchmark::State& state) {
  Setup& s = setup();
  double wall = 0.0;
  std::size_t records = 0, failed = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const UnitResult result =
        kvaudit::unit::run_unit(*s.model, s.weights, s.reuse_unit, s.reuse_cells, s.options());
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    records = result.cells.size();
    failed = count_failed(result);
    state.counters["prefill_s"] = result.timings.prefill_seconds;
    state.counters["select_s"] = result.timings.select_seconds;
  }
  set_counters(state, wall, records, failed);
}

void BM_SeparateQueryAgnosticUnits(benchmark::State& state) {
  Setup& s = setup();
  double wall = 0.0;
  std::size_t records = 0, failed = 0;
  for (auto _ : state) {
    records = failed = 0;
    double prefill = 0.0, select = 0.0;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t j = 0; j < s.reuse_unit.reuse_questions.size(); ++j) {
      const UnitResult result = kvaudit::unit::run_unit(
          *s.model, s.weights, s.single_question_unit(j), s.agnostic_cells, s.options());
      records += result.cells.size();
      failed += count_failed(result);
      prefill += result.timings.prefill_seconds;
      select += result.timings.select_seconds;
    }
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.counters["prefill_s"] = prefill;
    state.counters["select_s"] = select;
  }
  set_counters(state, wall, records, failed);
}

BENCHMARK(BM_ReuseUnit)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_SeparateQueryAgnosticUnits)->Unit(benchmark::kSecond)->UseRealTime()->Iterations(2);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu_isa", kvaudit::cpu::describe_active_cpu_isa());
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::AddCustomContext("model", setup().model_name);
  benchmark::AddCustomContext("context_tokens", std::to_string(setup().reuse_unit.context.size()));
  benchmark::AddCustomContext("questions",
                              std::to_string(setup().reuse_unit.reuse_questions.size()));
  benchmark::AddCustomContext("cells", std::to_string(setup().reuse_cells.size()));
  benchmark::AddCustomContext("new_tokens", std::to_string(kNewTokens));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

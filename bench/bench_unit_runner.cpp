// Benchmark of the unit runner (runners/unit): one unit of SmolLM2-135M-Instruct at a 2K-token
// context, 9 methods × 4 compressions {0.25, 0.5, 0.75, 0.9} × 2 protocols (+ the two full-KV
// cells), timed through the fan-out route (one prefill, capture, per-cell eviction, batched decode)
// and through the naive route (one prefill per cell), side by side. A plain timed program (one
// run of each route is long enough to need no repetition); it also checks that both routes gave
// the same greedy outputs and kept entries, and says so.
//
//   [KVAUDIT_CPU_ISA=avx2] OMP_WAIT_POLICY=passive build/bench/bench_unit_runner
//      [--context-tokens 2048] [--new-tokens 8] [--naive-cells N]
// --naive-cells N times only N of the cells (evenly spread over the list, so both protocols and
// all methods are sampled) through the naive route and scales its time to all cells (linear:
// every naive cell does the same work: a prefill of Lc or Lq tokens, a feed and a decode), for
// runs on a busy machine; default: all cells.
// The model is read from $KVAUDIT_BENCH_MODEL (default: the embedded SmolLM2 GGUF, dequantized
// to f32); the document is synthetic (numbered courier records), tokenized by the model's own
// tokenizer with the chatml template and kvpress's context/question split.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
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
using kvaudit::unit::CellStatus;
using kvaudit::unit::UnitResult;

struct Arguments {
  int context_tokens = 2048;
  int new_tokens = 8;
  int naive_cells = 0;  // 0: all
};

int positive(const std::string& flag, const char* value) {
  const int n = std::atoi(value);
  if (n <= 0) throw std::invalid_argument(flag + " needs a positive integer, got '" + value + "'");
  return n;
}

Arguments parse(int argc, char** argv) {
  Arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    if (flag == "--context-tokens") {
      a.context_tokens = positive(flag, argv[++i]);
    } else if (flag == "--new-tokens") {
      a.new_tokens = positive(flag, argv[++i]);
    } else if (flag == "--naive-cells") {
      a.naive_cells = positive(flag, argv[++i]);
    } else {
      throw std::invalid_argument("unknown option " + flag +
                                  " (known: --context-tokens, --new-tokens, --naive-cells)");
    }
  }
  return a;
}

void print_phases(const char* route, const UnitResult& r) {
  std::printf(
      "  %-8s prefill %8.2f s  select %7.2f s  evict %6.2f s  feed %7.2f s  decode %7.2f s"
      "  total %8.2f s\n",
      route, r.timings.prefill_seconds, r.timings.select_seconds, r.timings.evict_seconds,
      r.timings.feed_seconds, r.timings.decode_seconds, r.timings.total_seconds);
}

int run(int argc, char** argv) {
  const Arguments args = parse(argc, argv);
  const std::string path = kvaudit::bench::bench_model_path();
  const kvaudit::model::ModelWeights weights = kvaudit::model::load_model_weights(path);
  const std::unique_ptr<kvaudit::model::Tokenizer> tokenizer = kvaudit::model::load_tokenizer(path);
  kvaudit::cpu::CpuModel model(weights, kvaudit::AttentionBackend::eager);
  const kvaudit::unit::UnitTokens unit =
      kvaudit::bench::make_courier_unit(*tokenizer, args.context_tokens);

  const kvaudit::methods::MethodConfig snap{
      .name = "snap", .id = "snapkv", .variant = "", .params = {}};
  const kvaudit::methods::ConfigResolver resolve = [&](const std::string& name) {
    return name == "snap" ? &snap : nullptr;
  };
  std::vector<std::unique_ptr<kvaudit::methods::Method>> methods;
  for (const char* id : {"knorm", "snapkv", "tova", "observed_attention", "expected_attention",
                         "adakv", "streaming_llm", "keydiff", "random"}) {
    kvaudit::methods::MethodConfig config{.name = id, .id = id, .variant = "", .params = {}};
    if (std::string(id) == "adakv") config.params["scorer"] = std::string("snap");
    methods.push_back(kvaudit::methods::make_method(config, resolve));
  }
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (const auto& method : methods)
      for (double cr : {0.25, 0.5, 0.75, 0.9})
        cells.push_back({method.get(), {.compression = cr}, protocol, key++});
  }
  kvaudit::unit::UnitRunOptions options;
  options.decode.max_new_tokens = args.new_tokens;  // no stop ids: every cell decodes them all
  options.seed = 1;

  std::printf(
      "bench_unit_runner: %s\n  %d layers, %d heads, %d KV heads, head_dim %d; context %zu"
      " + question %zu + suffix %zu tokens; %zu cells; %d new tokens each\n"
      "  %d OpenMP threads, %u hardware threads\n",
      path.c_str(), weights.config.num_layers, weights.config.num_heads,
      weights.config.num_kv_heads, weights.config.head_dim, unit.context.size(),
      unit.question.size(), unit.suffix.size(), cells.size(), args.new_tokens,
      omp_get_max_threads(), std::thread::hardware_concurrency());
  std::fflush(stdout);

  const UnitResult fan_out = kvaudit::unit::run_unit(model, weights, unit, cells, options);
  print_phases("fan-out", fan_out);
  std::fflush(stdout);
  const std::size_t naive_count =
      args.naive_cells > 0 ? std::min(cells.size(), static_cast<std::size_t>(args.naive_cells))
                           : cells.size();
  std::vector<std::size_t> sampled;  // indices into `cells`
  std::vector<CellSpec> naive_cells;
  for (std::size_t k = 0; k < naive_count; ++k) {
    sampled.push_back(k * cells.size() / naive_count);
    naive_cells.push_back(cells[sampled.back()]);
  }
  const UnitResult naive =
      kvaudit::unit::run_unit_naive(model, weights, unit, naive_cells, options);
  print_phases("naive", naive);

  std::size_t failed = 0, same_output = 0;
  for (std::size_t i = 0; i < naive_count; ++i) {
    const auto& a = fan_out.cells[sampled[i]];
    const auto& b = naive.cells[i];
    if (a.status != CellStatus::ok || b.status != CellStatus::ok) {
      ++failed;
      std::printf("  cell %zu failed: %s%s\n", sampled[i], a.error.c_str(), b.error.c_str());
    }
    if (a.generated == b.generated && a.kept_entries == b.kept_entries) ++same_output;
  }
  const double naive_all = naive.timings.total_seconds * static_cast<double>(cells.size()) /
                           static_cast<double>(naive_count);
  std::printf("  naive route %s: %.2f s for %zu cells%s\n",
              naive_count == cells.size() ? "measured" : "scaled", naive_all, cells.size(),
              naive_count == cells.size() ? "" : " (linear extrapolation)");
  std::printf(
      "  fan-out %.2f s vs naive %.2f s: speed-up %.1fx; %zu of %zu compared cells gave"
      " identical outputs and kept entries; %zu failed\n",
      fan_out.timings.total_seconds, naive_all, naive_all / fan_out.timings.total_seconds,
      same_output, naive_count, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::printf("CPU engine instruction-set level: %s\n",
                kvaudit::cpu::describe_active_cpu_isa().c_str());
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_unit_runner: %s\n", error.what());
    return 2;
  }
}

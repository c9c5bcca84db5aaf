// Per-method selection time on one SmolLM2-135M-Instruct unit: every method of the catalogue
// (methods/catalog.h) at compression 0.5 (threshold methods at --threshold), under both protocols,
// through the unit runner's fan-out route (one prefill with the capture every cell needs, then each
// cell's Method::select, eviction and a one-token decode). Prints one row per method: the
// selection seconds of its query-agnostic and query-aware cells (CellResult::select_seconds plus
// its share of any extra pass the method runs, extra_pass_seconds) and the kept entries. A plain
// timed program.
//
//   [KVAUDIT_CPU_ISA=avx2] OMP_WAIT_POLICY=passive build/bench/bench_method_selection
//      [--context-tokens 2048] [--threshold 0.1] [--only id,id,...] [--artefacts DIR]
// Wrappers get `scorer = snapkv` (kvpress defaults; `chunk` and `block` get knorm, since they
// refuse window scorers over several chunks or blocks); think prunes half of each head's key
// channels (compression 0.25, its fixed ratio); per_layer_compression alternates 0.25/0.75 over the
// layers and composed is streaming_llm 0.25 then snapkv 1/3 (both mean 0.5). File parameters are
// read from
// --artefacts DIR (default results/every-method-artefacts: `python3 tools/make_demo_artefacts.py`
// makes SYNTHETIC ones, which time the code but mean nothing); a method whose file is missing is
// listed as skipped, with the parameter's name.
// The model is read from $KVAUDIT_BENCH_MODEL (default: the embedded SmolLM2 GGUF, dequantized
// to f32); the document is the synthetic courier unit of bench/courier_unit.h.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/courier_unit.h"
#include "methods/catalog.h"
#include "methods/method_factory.h"
#include "runners/cpu/cpu_isa.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/unit_runner.h"

namespace {

using kvaudit::Protocol;
using kvaudit::methods::BudgetAxis;
using kvaudit::methods::MethodConfig;
using kvaudit::methods::ParamType;
using kvaudit::unit::CellSpec;
using kvaudit::unit::CellStatus;

struct Arguments {
  int context_tokens = 2048;
  double threshold = 0.1;
  std::set<std::string> only;  // empty: every method
  std::string artefacts = std::string(KVAUDIT_SOURCE_DIR) + "/results/every-method-artefacts";
};

Arguments parse(int argc, char** argv) {
  Arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--context-tokens") {
      a.context_tokens = std::stoi(value);
      if (a.context_tokens <= 0) throw std::invalid_argument("--context-tokens must be positive");
    } else if (flag == "--threshold") {
      a.threshold = std::stod(value);
    } else if (flag == "--artefacts") {
      a.artefacts = value;
    } else if (flag == "--only") {
      std::stringstream list(value);
      for (std::string id; std::getline(list, id, ',');) a.only.insert(id);
    } else {
      throw std::invalid_argument("unknown option " + flag +
                                  " (known: --context-tokens, --threshold, --only, --artefacts)");
    }
  }
  return a;
}

struct Row {
  std::string id;
  std::string skipped;             // why, when the method is not run
  std::vector<std::size_t> cells;  // indices into the cell list: query-agnostic, query-aware
};

int run(int argc, char** argv) {
  const Arguments args = parse(argc, argv);
  const std::string path = kvaudit::bench::bench_model_path();
  const kvaudit::model::ModelWeights weights = kvaudit::model::load_model_weights(path);
  const std::unique_ptr<kvaudit::model::Tokenizer> tokenizer = kvaudit::model::load_tokenizer(path);
  kvaudit::cpu::CpuModel model(weights, kvaudit::AttentionBackend::eager);
  const kvaudit::unit::UnitTokens unit =
      kvaudit::bench::make_courier_unit(*tokenizer, args.context_tokens);

  const MethodConfig snap{.name = "snap", .id = "snapkv", .variant = "", .params = {}};
  const MethodConfig knorm{.name = "knorm", .id = "knorm", .variant = "", .params = {}};
  const MethodConfig sinks{.name = "sinks", .id = "streaming_llm", .variant = "", .params = {}};
  const kvaudit::methods::ConfigResolver resolve = [&](const std::string& name) {
    for (const MethodConfig* c : {&snap, &knorm, &sinks})
      if (c->name == name) return c;
    return static_cast<const MethodConfig*>(nullptr);
  };
  std::string alternating;  // per_layer_compression: 0.25, 0.75, ... over the layers (mean 0.5)
  for (int layer = 0; layer < weights.config.num_layers; ++layer)
    alternating += std::string(layer ? "," : "") + (layer % 2 ? "0.75" : "0.25");
  if (weights.config.num_layers % 2 != 0)
    throw std::invalid_argument("the per_layer_compression row assumes an even layer count");
  // The files a method parameter names, by parameter name.
  const std::map<std::string, std::string> files{
      {"filters", args.artefacts + "/qfilter.safetensors"},
      {"statistics", args.artefacts + "/ea_stats.safetensors"},
      {"pattern", args.artefacts + "/duo_pattern.tsv"},
      {"head_scores", args.artefacts + "/head_scores.json"},
      {"gates", args.artefacts + "/fastkvzip_gates.safetensors"},
      {"curve", args.artefacts + "/lukv_curve.npy"},
      {"model", args.artefacts + "/kvzap_mlp.safetensors"},
      {"restore_embeddings", args.artefacts + "/restorekv/restore_embeddings.safetensors"},
      {"adapter", args.artefacts + "/restorekv"}};
  std::vector<std::unique_ptr<kvaudit::methods::Method>> methods;
  std::vector<CellSpec> cells;
  std::vector<Row> rows;
  std::uint64_t key = 1;
  for (const auto& spec : kvaudit::methods::method_catalog()) {
    if (!args.only.empty() && args.only.count(spec.id) == 0) continue;
    Row row{.id = spec.id, .skipped = {}, .cells = {}};
    MethodConfig config{.name = spec.id, .id = spec.id, .variant = "", .params = {}};
    for (const auto& param : spec.params) {
      if (param.type == ParamType::method_ref) {
        config.params[param.name] =
            std::string(spec.id == "chunk" || spec.id == "block" ? "knorm" : "snap");
      } else if (param.type == ParamType::path) {
        const std::string file = files.count(param.name) ? files.at(param.name) : "";
        const bool present = param.directory_files.empty() ? std::filesystem::is_regular_file(file)
                                                           : std::filesystem::is_directory(file);
        if (!file.empty() && present) {
          config.params[param.name] = file;
        } else if (!kvaudit::methods::default_for(param, "").has_value()) {
          row.skipped = "needs the file '" + param.name + "' (" + (file.empty() ? "?" : file) +
                        " is missing)";
        }
      } else if (param.name == "compression_ratios") {
        config.params[param.name] =
            spec.id == "composed" ? std::string("0.25,0.3333333333333333") : alternating;
      } else if (param.name == "presses") {
        config.params[param.name] = std::string("sinks,snap");
      } else if (!kvaudit::methods::default_for(param, "").has_value()) {
        row.skipped = "needs '" + param.name + "' (no default)";
      }
    }
    // think prunes half of each head's key channels (kvpress then reports compression 0.25).
    if (spec.id == "think") config.params["key_channel_compression_ratio"] = 0.5;
    if (row.skipped.empty()) {
      try {
        methods.push_back(kvaudit::methods::make_method(config, resolve));
      } catch (const std::exception& error) {
        row.skipped = error.what();
      }
    }
    if (row.skipped.empty()) {
      kvaudit::methods::Budget budget;
      if (spec.axis == BudgetAxis::threshold) {
        budget.threshold = args.threshold;
      } else if (spec.axis == BudgetAxis::ratio) {
        budget.compression = 0.5;
        // Methods whose compression follows from their parameters (think, composed, ...).
        if (spec.fixed_compression) {
          if (const auto fixed = spec.fixed_compression(methods.back()->parameters())) {
            budget.compression = *fixed;
          }
        }
      }
      for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
        row.cells.push_back(cells.size());
        cells.push_back({spec.axis == BudgetAxis::none ? nullptr : methods.back().get(), budget,
                         protocol, key++});
      }
    }
    rows.push_back(std::move(row));
  }
  kvaudit::unit::UnitRunOptions options;
  options.decode.max_new_tokens = 1;
  options.seed = 1;
  std::printf(
      "bench_method_selection: %s\n  context %zu + question %zu + suffix %zu tokens; %zu cells;"
      " compression 0.5, threshold %.3g; %d OpenMP threads, %u hardware threads\n",
      path.c_str(), unit.context.size(), unit.question.size(), unit.suffix.size(), cells.size(),
      args.threshold, omp_get_max_threads(), std::thread::hardware_concurrency());
  std::fflush(stdout);
  const auto result = kvaudit::unit::run_unit(model, weights, unit, cells, options);
  std::printf("  shared prefill + capture %.2f s; whole unit %.2f s\n",
              result.timings.prefill_seconds, result.timings.total_seconds);
  std::printf("  %-28s %12s %12s %14s %14s\n", "method", "select qa [s]", "select qw [s]",
              "kept qa", "kept qw");
  int failed = 0;
  for (const Row& row : rows) {
    if (!row.skipped.empty()) {
      std::printf("  %-28s skipped: %s\n", row.id.c_str(), row.skipped.c_str());
      continue;
    }
    const auto& agnostic = result.cells[row.cells[0]];
    const auto& aware = result.cells[row.cells[1]];
    for (const auto* cell : {&agnostic, &aware}) {
      if (cell->status != CellStatus::ok) {
        ++failed;
        std::printf("  %-28s FAILED: %s\n", row.id.c_str(), cell->error.c_str());
      }
    }
    const auto selecting = [](const kvaudit::unit::CellResult& cell) {
      return cell.select_seconds +
             (std::isnan(cell.extra_pass_seconds) ? 0.0 : cell.extra_pass_seconds);
    };
    std::printf("  %-28s %12.3f %12.3f %14lld %14lld\n", row.id.c_str(), selecting(agnostic),
                selecting(aware), static_cast<long long>(agnostic.kept_entries),
                static_cast<long long>(aware.kept_entries));
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::printf("CPU engine instruction-set level: %s\n",
                kvaudit::cpu::describe_active_cpu_isa().c_str());
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_method_selection: %s\n", error.what());
    return 2;
  }
}

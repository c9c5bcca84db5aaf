// UnitExecutor: see unit_executor.h.
#include "suite/run/unit_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "methods/method_factory.h"
#include "runners/unit/cost_shares.h"
#include "runners/unit/unit_runner.h"
#include "suite/benchmarks/metrics/task_scoring.h"
#include "suite/manifest/method_configs.h"
#include "suite/records/content_digests.h"
#include "suite/run/cell_identity.h"
#include "suite/run/cuda_engine.h"
#include "suite/run/generation_tokenizer.h"
#include "suite/run/loaded_model.h"
#include "suite/run/unit_instance.h"

namespace kvaudit::run {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::uint32_t to_u32(std::size_t n) { return static_cast<std::uint32_t>(n); }

// Marks every record not yet finished with `status` and `message`.
double ms_or_unknown(double seconds) {
  return std::isnan(seconds) ? records::kNotApplicable : seconds * 1e3;
}

static_assert(static_cast<std::uint32_t>(unit::kPrefillShare) == records::kSharedPrefill &&
              static_cast<std::uint32_t>(unit::kCaptureShare) == records::kSharedCapture &&
              static_cast<std::uint32_t>(unit::kExtraPassShare) == records::kSharedExtraPass &&
              static_cast<std::uint32_t>(unit::kFeedShare) == records::kSharedFeed &&
              static_cast<std::uint32_t>(unit::kDecodeShare) == records::kSharedDecode &&
              static_cast<std::uint32_t>(unit::kSelectShare) == records::kSharedSelect &&
              static_cast<std::uint32_t>(unit::kEvictShare) == records::kSharedEvict);

// The schema-5 costs of a cell the fan-out ran (docs/RECORDS.md §Costs).
void record_costs(const unit::CellResult& c, bool evicting, records::CellRecord& r) {
  r.cell_prefill_ms = ms_or_unknown(c.prefill_seconds);
  r.cell_capture_ms = ms_or_unknown(c.capture_seconds);
  r.cell_extra_pass_ms = ms_or_unknown(c.extra_pass_seconds);
  r.cell_select_ms = evicting ? c.select_seconds * 1e3 : records::kNotApplicable;
  r.cell_evict_ms = c.evict_seconds * 1e3;
  r.cell_feed_ms = ms_or_unknown(c.feed_seconds);
  r.cell_decode_ms = ms_or_unknown(c.decode_seconds);
  r.peak_kv_bytes = static_cast<std::uint64_t>(c.peak_kv_bytes);
  r.final_kv_bytes = static_cast<std::uint64_t>(c.final_kv_bytes);
  r.decode_compressions = static_cast<std::uint32_t>(c.decode_compressions);
  r.shared_costs = c.shared_costs;
}

// A reuse unit's records: each cell's record repeated for questions 0 … k−1 (record i·k + j).
void expand_per_question(std::vector<records::CellRecord>& out, std::vector<bool>& finished,
                         std::size_t k) {
  std::vector<records::CellRecord> expanded;
  std::vector<bool> expanded_finished;
  expanded.reserve(out.size() * k);
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (std::size_t j = 0; j < k; ++j) {
      records::CellRecord r = out[i];
      r.question = static_cast<std::uint32_t>(j);
      r.n_questions = static_cast<std::uint32_t>(k);
      expanded.push_back(std::move(r));
      expanded_finished.push_back(finished[i]);
    }
  }
  out = std::move(expanded);
  finished = std::move(expanded_finished);
}

void fail_all(std::vector<records::CellRecord>& out, const std::vector<bool>& finished,
              records::CellStatus status, const std::string& message) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (finished[i]) continue;
    out[i].status = status;
    out[i].error = message;
  }
}

}  // namespace

struct UnitExecutor::Impl {
  const manifest::Manifest& manifest;
  const manifest::Expansion& expansion;
  UnitExecutorOptions options;

  // Method configurations in the factory's shape and the methods built so far.
  std::vector<methods::MethodConfig> configs;
  std::vector<std::unique_ptr<methods::Method>> built;
  std::vector<std::string> build_errors;  // "" until built or when built fine
  std::vector<bool> attempted;

  // One model at a time (a rank's units are grouped by model; holding several large models would
  // exhaust memory), with its benchmark instance sources; failures are remembered per model.
  std::unique_ptr<LoadedModel> model;
  std::map<std::size_t, std::unique_ptr<BenchmarkInstances>> instances;
  std::map<std::size_t, std::string> model_errors;

  Impl(const manifest::Manifest& m, const manifest::Expansion& e, UnitExecutorOptions o)
      : manifest(m), expansion(e), options(o) {
    configs = manifest::method_configs(m);
    built.resize(configs.size());
    build_errors.resize(configs.size());
    attempted.resize(configs.size(), false);
  }

  // The device of a model's units: the GPU when one is used, this kvaudit has the CUDA backend and
  // the model computes in bf16 (the CUDA backend's only numerics); otherwise the CPU backend.
  Device device_for(const LoadedModel& m) const {
    return options.use_gpu && cuda_engine_built() &&
                   m.weights().config.dtype == model::ComputeDtype::bf16
               ? Device::cuda
               : Device::cpu;
  }

  // The method of config `index`, or nullptr with build_errors[index] set.
  const methods::Method* method(std::size_t index) {
    if (!attempted[index]) {
      attempted[index] = true;
      const methods::ConfigResolver resolve = manifest::config_resolver(configs);
      try {
        built[index] = methods::make_method(configs[index], resolve);
      } catch (const std::exception& e) {
        build_errors[index] = std::string("method config ") + configs[index].name + ": " + e.what();
      }
    }
    return built[index].get();
  }

  LoadedModel& loaded_model(std::size_t index) {
    if (const auto it = model_errors.find(index); it != model_errors.end()) {
      throw std::runtime_error(it->second);
    }
    if (!model || model->index() != index) {
      instances.clear();
      model.reset();
      try {
        model = std::make_unique<LoadedModel>(manifest, index);
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception& e) {
        const std::string message = "model " + manifest.models[index].name + ": " + e.what();
        model_errors.emplace(index, message);
        throw std::runtime_error(message);
      }
    }
    return *model;
  }

  BenchmarkInstances& instances_of(LoadedModel& m, std::size_t benchmark) {
    auto& slot = instances[benchmark];
    if (!slot) {
      slot = std::make_unique<BenchmarkInstances>(
          manifest, benchmark, m, options.max_context,
          generation_tokenizer_of(manifest, manifest.benchmarks[benchmark]));
    }
    return *slot;
  }

  // The identity fields (cell_identity.h, shared with the rank loop's failure records) plus this
  // executor's rank and attempt.
  records::CellRecord base_record(const manifest::Unit& unit, const manifest::Cell& cell) const {
    records::CellRecord r = cell_identity_record(manifest, unit, cell);
    r.attempt = options.attempt;
    r.rank = options.rank;
    return r;
  }

  static methods::Budget budget_of(const manifest::Cell& cell) {
    methods::Budget b;
    switch (cell.budget_kind) {
      case manifest::BudgetKind::compression:
        b.compression = cell.budget;
        break;
      case manifest::BudgetKind::retention:
        b.compression = 1.0 - cell.budget;
        break;
      case manifest::BudgetKind::threshold:
        b.threshold = cell.budget;
        break;
      case manifest::BudgetKind::none:
        break;
    }
    return b;
  }

  // Everything after the base records: instance, fan-out, scores. Throws for unit-wide failures.
  void run(const manifest::Unit& unit, std::span<const manifest::Cell* const> cells,
           std::vector<records::CellRecord>& out, std::vector<bool>& finished, UnitTrace* trace) {
    LoadedModel& m = loaded_model(unit.model);
    const manifest::Benchmark& bench = manifest.benchmarks[unit.benchmark];
    const std::string task = manifest::unit_task(manifest, unit);
    UnitInstance instance;
    try {
      BenchmarkInstances& source = instances_of(m, unit.benchmark);
      instance =
          unit.reuse ? source.build_reuse(task, unit.instance) : source.build(task, unit.instance);
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      throw std::runtime_error("benchmark " + bench.name + ", task " + task + ", instance " +
                               std::to_string(unit.instance) + ": " + e.what());
    }
    // A reuse unit writes one record per (cell, question): record i·k + j is cell i's question j.
    const std::size_t k = unit.reuse ? instance.tokens.reuse_questions.size() : 1;
    if (k == 0) throw std::runtime_error("task " + task + ": a reuse context without questions");
    if (unit.reuse) expand_per_question(out, finished, k);
    const std::size_t n_context = instance.tokens.context.size();
    if (trace != nullptr) {
      trace->tokens = instance.tokens;
      trace->layers = m.weights().config.num_layers;
      trace->kv_heads = m.weights().config.num_kv_heads;
      trace->selections.assign(cells.size(), std::nullopt);
      trace->boundaries.assign(cells.size(), 0);
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
      records::CellRecord& r = out[i];
      const auto& question =
          unit.reuse ? instance.tokens.reuse_questions[i % k].question : instance.tokens.question;
      const auto& suffix =
          unit.reuse ? instance.tokens.reuse_questions[i % k].suffix : instance.tokens.suffix;
      r.prompt_digest = records::prompt_digest(instance.tokens.context, question, suffix);
      r.nominal_length = static_cast<std::uint32_t>(instance.nominal_length);
      r.n_prompt_tokens = to_u32(n_context + question.size() + suffix.size());
      r.n_context_tokens = to_u32(n_context);
      r.n_question_tokens = to_u32(question.size());
    }
    if (instance.excluded) {
      fail_all(out, finished, records::CellStatus::excluded, *instance.excluded);
      std::fill(finished.begin(), finished.end(), true);
      return;
    }

    // One CellSpec per runnable cell; a method that cannot be built fails its cells only.
    std::vector<unit::CellSpec> specs;
    // Decode-time compression settings of the cells whose grid has a `decoding` table (reserved:
    // CellSpec::decoding points into it).
    std::vector<unit::DecodingCell> decodings;
    decodings.reserve(cells.size());
    std::vector<std::size_t>
        spec_of;  // specs[s] belongs to cell spec_of[s] (its records: out[spec_of[s]·k + j])
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const manifest::Cell& cell = *cells[i];
      unit::CellSpec spec;
      if (cell.method >= 0) {
        const auto mi = static_cast<std::size_t>(cell.method);
        spec.method = method(mi);
        if (!spec.method) {
          for (std::size_t j = 0; j < k; ++j) {
            out[i * k + j].status = records::CellStatus::error;
            out[i * k + j].error = build_errors[mi];
            finished[i * k + j] = true;
          }
          continue;
        }
      }
      if (cell.decoding_grid >= 0) {
        const manifest::GridDecoding& d =
            *manifest.grids.at(static_cast<std::size_t>(cell.decoding_grid)).decoding;
        const auto di =
            static_cast<std::size_t>(manifest.find_method(d.method) - manifest.methods.data());
        const methods::Method* decoding_method = method(di);
        if (!decoding_method) {
          for (std::size_t j = 0; j < k; ++j) {
            out[i * k + j].status = records::CellStatus::error;
            out[i * k + j].error = "decoding: " + build_errors[di];
            finished[i * k + j] = true;
          }
          continue;
        }
        unit::DecodingPolicy policy;
        policy.compression_interval = static_cast<int>(d.compression_interval);
        policy.target_size = static_cast<int>(d.target_size);
        policy.hidden_states_buffer_size = static_cast<int>(d.hidden_states_buffer_size);
        policy.query_positions = d.query_positions == "own"
                                     ? unit::BufferedQueryPositions::own
                                     : unit::BufferedQueryPositions::current_step;
        policy.merge_budget = d.merge_budget ? static_cast<int>(*d.merge_budget) : 0;
        policy.target_compression_ratio = d.target_compression_ratio;
        decodings.push_back(unit::DecodingCell{decoding_method, policy});
        spec.decoding = &decodings.back();
      }
      spec.budget = budget_of(cell);
      spec.protocol = cell.protocol;
      spec.cell_key = manifest::selection_key(manifest, unit, cell);
      specs.push_back(spec);
      spec_of.push_back(i);
    }
    if (specs.empty()) return;

    unit::UnitRunOptions run_options;
    run_options.decode.max_new_tokens = instance.max_new_tokens;
    run_options.decode.stop_token_ids = m.stop_ids();
    run_options.seed = manifest.study.seed;
    run_options.max_batch_cells = options.max_batch_cells;
    const int layers = m.weights().config.num_layers;
    const int kv_heads = m.weights().config.num_kv_heads;
    run_options.kept_digest = [layers, kv_heads](const methods::Selection* selection,
                                                 int boundary) {
      return selection != nullptr ? records::kept_digest(selection->kept)
                                  : records::full_kept_digest(layers, kv_heads, boundary);
    };
    run_options.keep_selections = trace != nullptr;
    // The one fan-out, on the engine of the unit's device and attention backend.
    const Device device = device_for(m);
    const unit::UnitResult result = unit::run_unit(
        m.engine(device, unit.attention_backend), m.weights(), instance.tokens, specs, run_options);

    const double prefill_ms = result.timings.prefill_seconds * 1e3;
    const double decode_ms = (result.timings.feed_seconds + result.timings.decode_seconds) * 1e3;
    const auto bytes_per_entry =
        static_cast<std::uint64_t>(2 * m.weights().config.head_dim) * m.kv_bytes_per_element();
    for (const unit::CellResult& c : result.cells) {
      const auto spec = static_cast<std::size_t>(c.cell);
      const std::size_t cell_index = spec_of.at(spec);
      const std::size_t at = cell_index * k + static_cast<std::size_t>(c.question);
      records::CellRecord& r = out.at(at);
      finished[at] = true;
      r.prefill_ms = prefill_ms;
      r.device =
          device == Device::cuda ? records::ComputeDevice::cuda : records::ComputeDevice::cpu;
      r.threads = result.threads;
      record_costs(c, specs[spec].method != nullptr, r);
      r.full_bytes = static_cast<std::uint64_t>(c.candidate_entries) * bytes_per_entry;
      r.kept_digest = c.kept_digest;
      if (trace != nullptr && c.question == 0) {
        trace->boundaries[cell_index] = c.boundary;
        trace->selections[cell_index] = c.selection;
      }
      if (c.status != unit::CellStatus::ok) {
        r.status = records::CellStatus::error;
        r.error = c.error;
        continue;
      }
      r.decode_ms = decode_ms;
      r.kept_tokens = static_cast<std::uint64_t>(c.kept_entries);
      r.kept_bytes = static_cast<std::uint64_t>(c.kept_bytes);
      if (r.full_bytes > 0) {
        r.realised_retention =
            static_cast<double>(r.kept_bytes) / static_cast<double>(r.full_bytes);
      }
      r.n_generated_tokens = to_u32(c.generated.size());
      std::span<const std::int32_t> answer(c.generated);
      if (c.stopped_on_stop_token && !answer.empty()) answer = answer.first(answer.size() - 1);
      r.output = m.tokenizer().decode(answer, /*skip_special_tokens=*/true);
      try {
        const std::vector<std::string>& answers =
            unit.reuse ? instance.question_answers.at(static_cast<std::size_t>(c.question))
                       : instance.answers;
        r.score =
            metrics::score_task_request(bench.kind, task, r.output, answers, instance.all_classes);
        r.status = records::CellStatus::ok;
      } catch (const std::exception& e) {
        r.status = records::CellStatus::error;
        r.error = std::string("scoring: ") + e.what();
      }
    }
  }
};

UnitExecutor::UnitExecutor(const manifest::Manifest& manifest, const manifest::Expansion& expansion,
                           UnitExecutorOptions options)
    : impl_(std::make_unique<Impl>(manifest, expansion, options)) {
  if (options.max_batch_cells < 0) {
    throw std::invalid_argument("UnitExecutorOptions::max_batch_cells must be >= 0");
  }
}

UnitExecutor::~UnitExecutor() = default;

std::vector<records::CellRecord> UnitExecutor::execute(const manifest::Unit& unit,
                                                       std::span<const manifest::Cell* const> cells,
                                                       UnitTrace* trace) {
  const manifest::Manifest& m = impl_->manifest;
  const auto& units = impl_->expansion.units;
  if (unit.model >= m.models.size() || unit.benchmark >= m.benchmarks.size() ||
      unit.task >= m.benchmarks[unit.benchmark].tasks.size()) {
    throw std::invalid_argument("UnitExecutor::execute: unit " + std::to_string(unit.id) +
                                " does not belong to this manifest");
  }
  for (const manifest::Cell* cell : cells) {
    if (cell == nullptr || cell->unit >= units.size() || units[cell->unit].id != unit.id ||
        (cell->method >= 0 && static_cast<std::size_t>(cell->method) >= m.methods.size())) {
      throw std::invalid_argument("UnitExecutor::execute: a cell does not belong to unit " +
                                  std::to_string(unit.id));
    }
  }

  const std::int64_t t_start = now_ns();
  std::vector<records::CellRecord> out;
  out.reserve(cells.size());
  for (const manifest::Cell* cell : cells) out.push_back(impl_->base_record(unit, *cell));
  std::vector<bool> finished(cells.size(), false);
  if (!cells.empty()) {
    try {
      impl_->run(unit, cells, out, finished, trace);
    } catch (const std::bad_alloc&) {
      fail_all(out, finished, records::CellStatus::oom, "out of memory while running the unit");
    } catch (const std::exception& e) {
      fail_all(out, finished, records::CellStatus::error, e.what());
    }
  }
  const std::int64_t t_end = now_ns();
  for (auto& r : out) {
    r.t_start_ns = t_start;
    r.t_end_ns = t_end;
    if (r.status != records::CellStatus::ok) r.score = records::kNotApplicable;
  }
  return out;
}

double UnitExecutor::estimated_cost(const manifest::Manifest& manifest,
                                    const manifest::Unit& unit) {
  const manifest::Benchmark& bench = manifest.benchmarks.at(unit.benchmark);
  const auto length = static_cast<double>(bench.length);
  std::string task = bench.tasks.at(unit.task);
  const benchmarks::TaskSpec* spec = benchmarks::find_task(bench.kind, task);
  if (spec == nullptr && task.size() > 2 && task.ends_with("_e")) {
    spec = benchmarks::find_task(bench.kind, task.substr(0, task.size() - 2));
  }
  const double max_new = spec ? static_cast<double>(spec->max_new_tokens) : 64.0;
  const auto cells = static_cast<double>(std::max<std::uint32_t>(unit.n_cells, 1));
  // One prefill (∝ L); per cell a selection pass and a compacted copy (a small multiple of L) and
  // a decode share (∝ max_new_tokens).
  return length + cells * (max_new + length / 16.0);
}

}  // namespace kvaudit::run

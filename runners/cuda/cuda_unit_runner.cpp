// The GPU unit runner; see cuda_unit_runner.h.
#include "runners/cuda/cuda_unit_runner.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "methods/score_memo.h"
#include "runners/cpu/greedy_generation.h"
#include "runners/cuda/capture/cuda_prefill_capture.h"
#include "runners/cuda/capture/gpu_top_k.h"
#include "runners/cuda/memory_planner.h"

namespace kvaudit::cuda {
namespace {

using Clock = std::chrono::steady_clock;
using unit::CellResult;
using unit::CellSpec;
using unit::CellStatus;
using unit::Protocol;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("GPU unit runner: " + message);
}

std::vector<std::vector<std::int32_t>> flatten(const methods::Selection& selection, int layers,
                                               int heads) {
  if (static_cast<int>(selection.kept.size()) != layers) {
    throw std::invalid_argument("the selection has " + std::to_string(selection.kept.size()) +
                                " layers, the model " + std::to_string(layers));
  }
  std::vector<std::vector<std::int32_t>> keep;
  for (int l = 0; l < layers; ++l) {
    const auto& per_head = selection.kept[static_cast<std::size_t>(l)];
    if (static_cast<int>(per_head.size()) != heads) {
      throw std::invalid_argument("layer " + std::to_string(l) + " of the selection has " +
                                  std::to_string(per_head.size()) + " KV heads, the model " +
                                  std::to_string(heads));
    }
    for (const auto& kept : per_head) keep.push_back(kept);
  }
  return keep;
}

}  // namespace

unit::UnitResult run_unit_cuda(CudaModel& model, const model::ModelWeights& weights,
                               const unit::UnitTokens& tokens, std::span<const CellSpec> cells,
                               const unit::UnitRunOptions& options,
                               std::span<const std::optional<GpuScorerSpec>> gpu_scorers) {
  const Clock::time_point start = Clock::now();
  const model::ModelConfig& c = model.config();
  require(weights.config.num_layers == c.num_layers &&
              weights.config.hidden_size == c.hidden_size &&
              weights.config.num_kv_heads == c.num_kv_heads,
          "the weights '" + weights.source + "' are not the model's");
  require(!tokens.context.empty(), "the unit has no context tokens");
  require(!tokens.suffix.empty(),
          "the unit has no suffix tokens (template suffix + answer prefix)");
  require(options.decode.max_new_tokens >= 0, "max_new_tokens must be >= 0");
  require(options.max_batch_cells >= 0, "max_batch_cells must be >= 0");
  require(gpu_scorers.empty() || gpu_scorers.size() == cells.size(),
          "gpu_scorers must be empty or have one entry per cell");

  std::vector<std::int32_t> prompt = tokens.context;
  prompt.insert(prompt.end(), tokens.question.begin(), tokens.question.end());
  const int context_end = static_cast<int>(tokens.context.size());
  const int question_end = static_cast<int>(prompt.size());
  auto boundary_of = [&](const CellSpec& cell) {
    return cell.protocol == Protocol::query_agnostic ? context_end : question_end;
  };
  // Every cache holds the prompt, the suffix and the generated tokens (the last is not fed).
  const std::int64_t capacity64 = static_cast<std::int64_t>(prompt.size() + tokens.suffix.size()) +
                                  options.decode.max_new_tokens + 1;
  require(capacity64 < std::numeric_limits<int>::max(), "the unit has too many tokens");
  const int capacity = static_cast<int>(capacity64);

  unit::UnitResult result;
  result.context_end = context_end;
  result.question_end = question_end;
  result.cells.resize(cells.size());

  // Memory plan: the prefill must fit; cells are batched by what fits beside it.
  UnitMemoryDemand demand;
  demand.prefill_tokens = question_end;
  demand.capacity = capacity;
  demand.concurrent_cells = static_cast<int>(cells.size());
  demand.logit_rows = static_cast<int>(cells.size());
  demand.backend = model.backend();
  const MemoryPlan plan =
      plan_unit_memory(c, demand, free_device_memory() + device_weight_bytes(c));
  if (plan.max_concurrent_cells < 1)
    throw GpuMemoryError("the unit does not fit the GPU: " + plan.summary);

  unit::CaptureOptions capture_options;
  bool any_method = false;
  for (const CellSpec& cell : cells) {
    if (cell.method == nullptr) continue;
    any_method = true;
    capture_options.boundaries.push_back(boundary_of(cell));
    capture_options.window_rows =
        std::max(capture_options.window_rows, cell.method->window_needed());
    capture_options.column_sums = capture_options.column_sums || cell.method->needs_column_sums();
    capture_options.query_moments =
        capture_options.query_moments || cell.method->needs_query_moments();
  }
  std::unique_ptr<CudaPrefillCapture> capture;
  if (any_method) capture = std::make_unique<CudaPrefillCapture>(c, capture_options);

  DeviceKvCache prefilled = model.new_sequence(capacity);
  Clock::time_point phase = Clock::now();
  model.prefill(prefilled, prompt, cpu::LogitRows::none, capture.get());
  result.timings.prefill_seconds = seconds_since(phase);

  // Selections.
  std::map<int, std::vector<methods::LayerCapture>> views;
  std::map<std::pair<const methods::Method*, int>, DeviceBuffer<float>> gpu_scores;
  methods::ScoreMemo memo;
  std::vector<std::optional<methods::Selection>> selections(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) {
    CellResult& cell_result = result.cells[i];
    cell_result.boundary = boundary_of(cells[i]);
    const CellSpec& cell = cells[i];
    if (cell.method == nullptr) continue;
    const int b = cell_result.boundary;
    const Clock::time_point select_start = Clock::now();
    try {
      const std::optional<GpuScorerSpec>* gpu = gpu_scorers.empty() ? nullptr : &gpu_scorers[i];
      if (gpu != nullptr && gpu->has_value()) {
        const std::size_t per_layer = static_cast<std::size_t>(c.num_kv_heads) * b;
        auto key = std::make_pair(cell.method, b);
        auto found = gpu_scores.find(key);
        if (found == gpu_scores.end()) {
          DeviceBuffer<float> scores(per_layer * static_cast<std::size_t>(c.num_layers));
          for (int l = 0; l < c.num_layers; ++l) {
            score_on_gpu(**gpu, capture->device_layer(l, b), model.rope_inv_freq(),
                         scores.data() + per_layer * static_cast<std::size_t>(l), model.stream());
          }
          found = gpu_scores.emplace(key, std::move(scores)).first;
        }
        const std::int64_t n_kept = methods::kept_count(b, cell.budget.compression);
        methods::Selection selection;
        for (int l = 0; l < c.num_layers; ++l) {
          selection.kept.push_back(
              select_top_k_on_gpu(found->second.data() + per_layer * static_cast<std::size_t>(l),
                                  c.num_kv_heads, b, n_kept, model.stream()));
        }
        selections[i] = std::move(selection);
      } else {
        auto view = views.find(b);
        if (view == views.end()) {
          view = views.emplace(b, capture->layers(b, weights, model.rope_inv_freq())).first;
        }
        selections[i] =
            cell.method->select(view->second, cell.budget,
                                methods::SelectionContext{options.seed, cell.cell_key, &memo});
      }
    } catch (const std::exception& error) {
      cell_result.status = CellStatus::failed;
      cell_result.error = "method " + cell.method->name() + " failed: " + error.what();
    }
    cell_result.select_seconds = seconds_since(select_start);
  }

  // Per batch: compacted copies, feed, greedy decode.
  std::vector<std::size_t> runnable;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (result.cells[i].status == CellStatus::ok) runnable.push_back(i);
  }
  std::size_t batch_limit = options.max_batch_cells > 0
                                ? static_cast<std::size_t>(options.max_batch_cells)
                                : std::max<std::size_t>(runnable.size(), 1);
  batch_limit = std::min(batch_limit, static_cast<std::size_t>(plan.max_concurrent_cells));
  const std::int64_t layers = c.num_layers, heads = c.num_kv_heads;
  for (std::size_t first = 0; first < runnable.size(); first += batch_limit) {
    const std::size_t last = std::min(runnable.size(), first + batch_limit);
    std::vector<std::size_t> batch;
    std::vector<std::unique_ptr<DeviceKvCache>> caches;
    std::vector<std::vector<std::int32_t>> feeds;
    for (std::size_t k = first; k < last; ++k) {
      const std::size_t i = runnable[k];
      CellResult& cell_result = result.cells[i];
      const Clock::time_point evict_start = Clock::now();
      try {
        auto cache = std::make_unique<DeviceKvCache>(prefilled.clone());
        cache->truncate(cell_result.boundary);
        cell_result.candidate_entries =
            static_cast<std::int64_t>(cell_result.boundary) * layers * heads;
        if (selections[i]) {
          try {
            cache->retain(
                flatten(*selections[i], static_cast<int>(layers), static_cast<int>(heads)));
          } catch (const std::invalid_argument& error) {
            throw std::invalid_argument("method " + cells[i].method->name() +
                                        " returned an invalid selection: " + error.what());
          }
          if (options.keep_selections) cell_result.selection = *selections[i];
        }
        cell_result.kept_entries = static_cast<std::int64_t>(cache->kept_entries());
        cell_result.kept_bytes = static_cast<std::int64_t>(cache->kept_bytes());
        cell_result.realised_retention =
            cell_result.candidate_entries > 0
                ? static_cast<double>(cell_result.kept_entries) /
                      static_cast<double>(cell_result.candidate_entries)
                : 0.0;
        std::vector<std::int32_t> feed(prompt.begin() + cell_result.boundary, prompt.end());
        feed.insert(feed.end(), tokens.suffix.begin(), tokens.suffix.end());
        feeds.push_back(std::move(feed));
        caches.push_back(std::move(cache));
        batch.push_back(i);
      } catch (const std::exception& error) {
        cell_result.status = CellStatus::failed;
        cell_result.error = std::string("could not build the cell's cache: ") + error.what();
      }
      cell_result.evict_seconds = seconds_since(evict_start);
    }
    if (batch.empty()) continue;
    std::vector<DeviceKvCache*> pointers;
    std::vector<std::span<const std::int32_t>> feed_spans;
    for (std::size_t k = 0; k < batch.size(); ++k) {
      pointers.push_back(caches[k].get());
      feed_spans.emplace_back(feeds[k]);
    }
    phase = Clock::now();
    std::vector<cpu::LogitMatrix> logits =
        model.prefill_batch(pointers, feed_spans, cpu::LogitRows::last);
    result.timings.feed_seconds += seconds_since(phase);

    // Batched greedy decoding, each cell stopping on its own (cpu::generate_greedy_batch's rules).
    phase = Clock::now();
    std::vector<std::size_t> running(batch.size());
    for (std::size_t k = 0; k < batch.size(); ++k) running[k] = k;
    std::vector<const float*> last_row(batch.size());
    for (std::size_t k = 0; k < batch.size(); ++k) last_row[k] = logits[k].values.data();
    cpu::LogitMatrix step_logits;
    const int vocab = c.vocab_size;
    for (int step = 0; step < options.decode.max_new_tokens && !running.empty(); ++step) {
      std::vector<std::size_t> still;
      std::vector<std::int32_t> next_tokens;
      for (std::size_t r = 0; r < running.size(); ++r) {
        const std::size_t k = running[r];
        const std::int32_t token =
            cpu::argmax_token(std::span<const float>(last_row[k], static_cast<std::size_t>(vocab)));
        CellResult& cell_result = result.cells[batch[k]];
        cell_result.generated.push_back(token);
        const bool stop =
            std::find(options.decode.stop_token_ids.begin(), options.decode.stop_token_ids.end(),
                      token) != options.decode.stop_token_ids.end();
        if (stop) {
          cell_result.stopped_on_stop_token = true;
          continue;
        }
        if (step + 1 == options.decode.max_new_tokens) continue;
        still.push_back(k);
        next_tokens.push_back(token);
      }
      running = std::move(still);
      if (running.empty()) break;
      std::vector<DeviceKvCache*> step_batch;
      for (std::size_t k : running) step_batch.push_back(caches[k].get());
      step_logits = model.decode_step(step_batch, next_tokens);
      for (std::size_t r = 0; r < running.size(); ++r) {
        last_row[running[r]] = step_logits.values.data() + r * static_cast<std::size_t>(vocab);
      }
    }
    result.timings.decode_seconds += seconds_since(phase);
  }
  for (const CellResult& cell : result.cells) {
    result.timings.select_seconds += cell.select_seconds;
    result.timings.evict_seconds += cell.evict_seconds;
  }
  result.timings.total_seconds = seconds_since(start);
  return result;
}

}  // namespace kvaudit::cuda

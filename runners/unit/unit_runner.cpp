// The unit runner's two routes (fan-out and naive) over an InferenceEngine; see unit_runner.h.
#include "runners/unit/unit_runner.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "methods/score_memo.h"
#include "runners/unit/cost_shares.h"
#include "runners/unit/greedy_decoding.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::unit {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("unit runner: " + message);
}

void check_tokens(std::span<const std::int32_t> ids, int vocab, const char* what) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && ids[i] < vocab, std::string(what) + " token " + std::to_string(i) +
                                               " has id " + std::to_string(ids[i]) +
                                               ", outside the vocabulary [0, " +
                                               std::to_string(vocab) + ")");
  }
}

// Facts shared by both routes.
struct UnitPlan {
  std::vector<std::int32_t> prompt;  // context + question (Lq tokens)
  int context_end = 0;               // Lc
  int question_end = 0;              // Lq
  CaptureOptions capture;            // boundaries left empty (each route sets its own)
  bool any_method = false;
  // Entries a cell's cache may reach: the prompt, the suffix and the generated tokens (the last
  // generated token is not fed).
  int capacity = 0;

  int boundary(const CellSpec& cell) const {
    return cell.protocol == Protocol::query_agnostic ? context_end : question_end;
  }
  // Question tokens at the end of the cell's view (methods::SelectionContext::question_tokens).
  int question_tokens(const CellSpec& cell) const { return boundary(cell) - context_end; }
  // Tokens fed on top of the (compressed) prefix of `boundary` tokens: the rest of the prompt,
  // then the suffix.
  std::vector<std::int32_t> feed(const CellSpec& cell, const UnitTokens& tokens) const {
    std::vector<std::int32_t> ids(prompt.begin() + boundary(cell), prompt.end());
    ids.insert(ids.end(), tokens.suffix.begin(), tokens.suffix.end());
    return ids;
  }
};

UnitPlan plan_unit(const InferenceEngine& engine, const model::ModelWeights& weights,
                   const UnitTokens& tokens, std::span<const CellSpec> cells,
                   const UnitRunOptions& options) {
  require(engine.built_from(weights),
          "the weights '" + weights.source + "' are not the ones the engine was built from");
  require(!tokens.context.empty(), "the unit has no context tokens");
  require(!tokens.suffix.empty(),
          "the unit has no suffix tokens (template suffix + answer prefix)");
  require(options.decode.max_new_tokens >= 0,
          "max_new_tokens is " + std::to_string(options.decode.max_new_tokens) + ", must be >= 0");
  require(options.max_batch_cells >= 0,
          "max_batch_cells is " + std::to_string(options.max_batch_cells) + ", must be >= 0");
  const int vocab = engine.config().vocab_size;
  check_tokens(tokens.context, vocab, "context");
  check_tokens(tokens.question, vocab, "question");
  check_tokens(tokens.suffix, vocab, "suffix");
  const std::size_t total = tokens.context.size() + tokens.question.size() + tokens.suffix.size() +
                            static_cast<std::size_t>(options.decode.max_new_tokens) + 1;
  require(total < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
          "the unit has too many tokens");

  UnitPlan plan;
  plan.prompt = tokens.context;
  plan.prompt.insert(plan.prompt.end(), tokens.question.begin(), tokens.question.end());
  plan.context_end = static_cast<int>(tokens.context.size());
  plan.question_end = static_cast<int>(plan.prompt.size());
  plan.capacity = static_cast<int>(total);
  for (const CellSpec& cell : cells) {
    if (cell.method == nullptr) continue;
    plan.any_method = true;
    plan.capture.window_rows =
        std::max(plan.capture.window_rows,
                 cell.method->window_rows_needed(plan.question_end - plan.context_end));
    plan.capture.column_sums = plan.capture.column_sums || cell.method->needs_column_sums();
    plan.capture.query_moments = plan.capture.query_moments || cell.method->needs_query_moments();
    plan.capture.attention_cosine =
        plan.capture.attention_cosine || cell.method->needs_attention_cosine();
    plan.capture.all_queries = plan.capture.all_queries || cell.method->needs_all_queries();
    plan.capture.attention_input =
        plan.capture.attention_input || cell.method->needs_attention_input();
  }
  return plan;
}

// Runs `select` (a selection of the cell's method, or nullopt) timed into the cell's result; a
// throwing selection fails the cell, naming the method. Nothing escapes: this runs inside the
// parallel loop over cells.
template <typename Select>
std::optional<methods::Selection> timed_selection(const CellSpec& cell, CellResult& result,
                                                  Select&& select) {
  const Clock::time_point start = Clock::now();
  try {
    std::optional<methods::Selection> selection = select();
    result.select_seconds = seconds_since(start);
    return selection;
  } catch (const std::exception& error) {
    result.select_seconds = seconds_since(start);
    result.status = CellStatus::failed;
    result.error = "method " + cell.method->name() + " failed: " + error.what();
  } catch (...) {
    result.select_seconds = seconds_since(start);
    result.status = CellStatus::failed;
    result.error = "method " + cell.method->name() + " failed with a non-standard exception";
  }
  return std::nullopt;
}

// The cell's method on the views of its boundary, whose last `question_tokens` positions are the
// question (UnitPlan::question_tokens). `memo` (optional) shares budget-independent scores between
// the cells of a unit.
std::optional<methods::Selection> select_cell(const CellSpec& cell,
                                              std::span<const methods::LayerCapture> layers,
                                              const UnitRunOptions& options, CellResult& result,
                                              int question_tokens,
                                              methods::ScoreMemo* memo = nullptr,
                                              const methods::ExtraPassResult* pass = nullptr) {
  std::optional<methods::Selection> selection =
      timed_selection(cell, result, [&]() -> std::optional<methods::Selection> {
        return cell.method->select(
            layers, cell.budget,
            methods::SelectionContext{options.seed, cell.cell_key, memo, pass, question_tokens});
      });
  return selection;
}

// Hands each layer of an extra pass's chunk to the pass (methods/extra_pass.h).
class ExtraPassFold final : public methods::PassObserver {
 public:
  ExtraPassFold(const methods::ExtraPass& pass, std::span<const methods::LayerCapture> layers,
                const methods::PassChunk& chunk, methods::ExtraPassResult& result)
      : pass_(pass), layers_(layers), chunk_(chunk), result_(result) {}
  void on_layer(const methods::PassLayerView& view) override {
    pass_.observe(layers_[static_cast<std::size_t>(view.layer)], chunk_, view, result_);
  }

 private:
  const methods::ExtraPass& pass_;
  std::span<const methods::LayerCapture> layers_;
  const methods::PassChunk& chunk_;
  methods::ExtraPassResult& result_;
};

}  // namespace

methods::ExtraPassResult run_extra_pass(InferenceEngine& engine, const methods::ExtraPass& pass,
                                        const SequenceCache& prefilled, int boundary,
                                        std::span<const methods::LayerCapture> layers,
                                        std::span<const std::int32_t> prompt,
                                        const methods::PassPrompt& pass_prompt) {
  const Clock::time_point start = Clock::now();
  methods::ExtraPassResult result = pass.initial_result(layers);
  const std::span<const std::int32_t> cached = prompt.first(static_cast<std::size_t>(boundary));
  for (const methods::PassChunk& chunk : pass.chunks(cached, pass_prompt)) {
    const std::unique_ptr<SequenceCache> copy = prefilled.fork();
    copy->truncate(boundary);
    ExtraPassFold fold(pass, layers, chunk, result);
    engine.observed_pass(*copy, chunk.tokens, fold);
  }
  result.seconds = seconds_since(start);
  return result;
}

namespace {

// An extra pass's result, or why it failed (every cell that shares it then fails).
struct ExtraPassOutcome {
  std::optional<methods::ExtraPassResult> result;
  std::string error;
  double seconds = 0.0;
};

ExtraPassOutcome try_extra_pass(InferenceEngine& engine, const methods::ExtraPass& pass,
                                const SequenceCache& prefilled, int boundary,
                                std::span<const methods::LayerCapture> layers,
                                std::span<const std::int32_t> prompt,
                                const methods::PassPrompt& pass_prompt) {
  const Clock::time_point start = Clock::now();
  ExtraPassOutcome outcome;
  try {
    outcome.result = run_extra_pass(engine, pass, prefilled, boundary, layers, prompt, pass_prompt);
  } catch (const std::exception& error) {
    outcome.error = std::string("its extra forward pass failed: ") + error.what();
  }
  outcome.seconds = seconds_since(start);
  return outcome;
}

// Fails the cell when its pass failed (timed with the pass), else returns the pass's result.
const methods::ExtraPassResult* pass_for_cell(const CellSpec& cell, const ExtraPassOutcome& outcome,
                                              CellResult& result) {
  if (outcome.result) return &*outcome.result;
  result.status = CellStatus::failed;
  result.error = "method " + cell.method->name() + " failed: " + outcome.error;
  return nullptr;
}

// Evicts `cache` (holding positions 0..b-1, nothing evicted) down to the selection and records
// the cell's kept counts; a selection of the wrong shape or with positions the cache does not hold
// fails the cell.
bool evict_cell(const InferenceEngine& engine, const CellSpec& cell,
                const methods::Selection* selection, SequenceCache& cache, CellResult& result) {
  const std::int64_t layers = cache.num_layers(), heads = cache.num_kv_heads();
  result.candidate_entries = static_cast<std::int64_t>(result.boundary) * layers * heads;
  if (selection != nullptr) {
    try {
      cache.retain(*selection);
    } catch (const std::exception& error) {
      result.status = CellStatus::failed;
      result.error =
          "method " + cell.method->name() + " returned an invalid selection: " + error.what();
      return false;
    }
    // key_rerotation (methods/key_rerotation.h) and finch with rerotate_keys (methods/finch.h):
    // the kept keys move to contiguous positions.
    const auto* finch = std::get_if<methods::FinchParams>(&cell.method->parameters());
    if (std::holds_alternative<methods::KeyRerotationParams>(cell.method->parameters()) ||
        (finch != nullptr && finch->rerotate_keys)) {
      try {
        cache.rerotate_kept_keys(engine.rope_inv_freq(),
                                 engine.config().dtype == model::ComputeDtype::bf16);
      } catch (const std::exception& error) {
        result.status = CellStatus::failed;
        result.error = "method " + cell.method->name() + ": " + error.what();
        return false;
      }
    }
    // think (methods/think.h) prunes key channels; merging (methods/merging.h) rewrites values.
    try {
      if (!selection->zeroed_key_channels.empty()) cache.zero_key_channels(*selection);
      if (!selection->value_replacements.empty()) {
        cache.replace_values(*selection, engine.config().dtype == model::ComputeDtype::bf16);
      }
    } catch (const std::exception& error) {
      result.status = CellStatus::failed;
      result.error = "method " + cell.method->name() + ": " + error.what();
      return false;
    }
  }
  result.kept_entries = static_cast<std::int64_t>(cache.kept_entries());
  result.kept_bytes = static_cast<std::int64_t>(cache.kept_bytes());
  result.realised_retention =
      result.candidate_entries > 0
          ? static_cast<double>(result.kept_entries) / static_cast<double>(result.candidate_entries)
          : 0.0;
  return true;
}

GreedyOptions greedy_options(const UnitRunOptions& options) {
  return {options.decode.max_new_tokens, options.decode.stop_token_ids};
}

void take_output(GreedyOutput output, CellResult& result) {
  result.generated = std::move(output.tokens);
  result.stopped_on_stop_token = output.stopped_on_eos;
}

void sum_cell_timings(UnitResult& unit) {
  for (const CellResult& cell : unit.cells) {
    unit.timings.select_seconds += cell.select_seconds;
    unit.timings.evict_seconds += cell.evict_seconds;
  }
}

// The capture's device fast path for the cell, if it has one (nullopt otherwise).
std::optional<methods::Selection> device_select_cell(const CellSpec& cell, PrefillCapture& capture,
                                                     CellResult& result) {
  return timed_selection(cell, result, [&] {
    return capture.device_selection(*cell.method, result.boundary, cell.budget);
  });
}

// Costs (cost_shares.h): `seconds` of a step shared by the cells `members`, in equal shares
// (flagged as shares when more than one cell shared it).
void share_step(UnitResult& unit, std::span<const std::size_t> members, double seconds,
                double CellResult::*cost, std::uint32_t share_bit) {
  const std::vector<double> shares = equal_shares(seconds, members.size());
  for (std::size_t k = 0; k < members.size(); ++k) {
    CellResult& cell = unit.cells[members[k]];
    cell.*cost = shares[k];
    if (members.size() > 1) cell.shared_costs |= share_bit;
  }
}

// A batch's feed: shares ∝ the tokens each cell fed.
void share_feed(UnitResult& unit, std::span<const std::size_t> batch,
                std::span<const std::vector<std::int32_t>> feeds, double seconds) {
  std::vector<std::size_t> tokens;
  for (const auto& feed : feeds) tokens.push_back(feed.size());
  const std::vector<double> shares = proportional_shares(seconds, tokens);
  for (std::size_t k = 0; k < batch.size(); ++k) {
    CellResult& cell = unit.cells[batch[k]];
    cell.feed_seconds = shares[k];
    if (batch.size() > 1) cell.shared_costs |= kFeedShare;
  }
}

// A batch's decode: each cell's share of the steps it was decoded in, the rest of the batch's
// decode time in equal shares; and each cell's cache at its largest (now, after decoding).
void share_decode(UnitResult& unit, std::span<const std::size_t> batch,
                  std::span<SequenceCache* const> caches, std::span<const GreedyOutput> outputs,
                  double seconds) {
  std::vector<double> step_shares;
  for (const GreedyOutput& output : outputs) step_shares.push_back(output.decode_step_seconds);
  const std::vector<double> shares = complete_shares(seconds, step_shares);
  for (std::size_t k = 0; k < batch.size(); ++k) {
    CellResult& cell = unit.cells[batch[k]];
    cell.decode_seconds = shares[k];
    if (batch.size() > 1) cell.shared_costs |= kDecodeShare;
    cell.peak_kv_bytes = static_cast<std::int64_t>(caches[k]->kept_bytes());
  }
}

std::vector<std::size_t> all_cells(std::size_t count) {
  std::vector<std::size_t> indices(count);
  for (std::size_t i = 0; i < count; ++i) indices[i] = i;
  return indices;
}

}  // namespace

UnitResult run_unit(InferenceEngine& engine, const model::ModelWeights& weights,
                    const UnitTokens& tokens, std::span<const CellSpec> cells,
                    const UnitRunOptions& options) {
  const Clock::time_point start = Clock::now();
  const UnitPlan plan = plan_unit(engine, weights, tokens, cells, options);
  UnitResult unit;
  unit.context_end = plan.context_end;
  unit.question_end = plan.question_end;
  unit.cells.resize(cells.size());
  // How many cells' caches fit at once beside the prefilled one (throws when the unit cannot run).
  const int fitting_cells = engine.max_concurrent_cells({.prefill_tokens = plan.question_end,
                                                         .capacity = plan.capacity,
                                                         .cells = static_cast<int>(cells.size())});

  // 1. One prefill over context + question, captured at the boundaries the evicting cells need.
  std::unique_ptr<PrefillCapture> capture;
  if (plan.any_method) {
    CaptureOptions capture_options = plan.capture;
    for (const CellSpec& cell : cells) {
      if (cell.method != nullptr) capture_options.boundaries.push_back(plan.boundary(cell));
    }
    capture = engine.new_capture(std::move(capture_options));
  }
  const std::unique_ptr<SequenceCache> prefilled = engine.new_cache(plan.capacity);
  Clock::time_point phase = Clock::now();
  engine.prefill(*prefilled, plan.prompt, LogitRows::none, capture.get());
  unit.timings.prefill_seconds = seconds_since(phase);
  share_step(unit, all_cells(cells.size()), unit.timings.prefill_seconds,
             &CellResult::prefill_seconds, kPrefillShare);

  // 2. Selections. First the capture's device fast paths (one after another: they share the
  // engine's stream), then every other evicting cell's Method::select on the views of its
  // boundary (built once per boundary). Those are independent: they run in parallel
  // (Method::select is const; methods keep no state), each writing only its own result.
  std::vector<std::optional<methods::Selection>> selections(cells.size());
  std::vector<bool> on_host(cells.size(), false);
  std::map<int, std::vector<methods::LayerCapture>> views;
  std::map<int, std::vector<std::size_t>> view_users;  // boundary -> the cells selecting on it
  std::map<int, double> view_seconds;                  // boundary -> time to build its views
  for (std::size_t i = 0; i < cells.size(); ++i) {
    CellResult& result = unit.cells[i];
    result.boundary = plan.boundary(cells[i]);
    if (cells[i].method == nullptr) continue;
    selections[i] = device_select_cell(cells[i], *capture, result);
    if (selections[i] || result.status != CellStatus::ok) continue;
    on_host[i] = true;
    view_users[result.boundary].push_back(i);
    if (!views.contains(result.boundary)) {
      const Clock::time_point view_start = Clock::now();
      views.emplace(result.boundary,
                    capture->layers(result.boundary, *prefilled, weights, engine.rope_inv_freq()));
      view_seconds[result.boundary] = seconds_since(view_start);
    }
  }
  for (const auto& [boundary, users] : view_users) {
    unit.timings.capture_seconds += view_seconds.at(boundary);
    share_step(unit, users, view_seconds.at(boundary), &CellResult::capture_seconds, kCaptureShare);
  }
  // Extra passes (methods/extra_pass.h), one after another on the engine: one run per (boundary,
  // pass key), shared by the cells whose methods give that key.
  std::map<std::pair<int, std::string>, ExtraPassOutcome> extra_passes;
  std::vector<const methods::ExtraPassResult*> pass_results(cells.size(), nullptr);
  std::map<std::pair<int, std::string>, std::vector<std::size_t>> pass_users;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (!on_host[i]) continue;
    const methods::ExtraPass* pass = cells[i].method->extra_pass();
    if (pass == nullptr) continue;
    const int b = unit.cells[i].boundary;
    auto found = extra_passes.find({b, pass->pass_key()});
    if (found == extra_passes.end()) {
      found = extra_passes
                  .emplace(std::make_pair(b, pass->pass_key()),
                           try_extra_pass(engine, *pass, *prefilled, b, views.at(b), plan.prompt,
                                          tokens.pass_prompt))
                  .first;
    }
    pass_users[found->first].push_back(i);
    pass_results[i] = pass_for_cell(cells[i], found->second, unit.cells[i]);
    if (pass_results[i] == nullptr) on_host[i] = false;
  }
  for (const auto& [key, users] : pass_users) {
    unit.timings.extra_pass_seconds += extra_passes.at(key).seconds;
    share_step(unit, users, extra_passes.at(key).seconds, &CellResult::extra_pass_seconds,
               kExtraPassShare);
  }
  // Cells that differ only in the budget share their scorer's scores (methods/score_memo.h).
  methods::ScoreMemo memo;
  const std::ptrdiff_t cell_count = static_cast<std::ptrdiff_t>(cells.size());
#pragma omp parallel for schedule(dynamic, 1) if (cell_count > 1)
  for (std::ptrdiff_t c = 0; c < cell_count; ++c) {
    const std::size_t i = static_cast<std::size_t>(c);
    if (!on_host[i]) continue;
    selections[i] = select_cell(cells[i], views.at(unit.cells[i].boundary), options, unit.cells[i],
                                plan.question_tokens(cells[i]), &memo, pass_results[i]);
  }

  // 3–4. Per batch of cells: compacted forks, feed the rest together, decode together.
  std::vector<std::size_t> runnable;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (unit.cells[i].status == CellStatus::ok) runnable.push_back(i);
  }
  std::size_t batch_limit = options.max_batch_cells > 0
                                ? static_cast<std::size_t>(options.max_batch_cells)
                                : std::max<std::size_t>(runnable.size(), 1);
  batch_limit = std::min(batch_limit, static_cast<std::size_t>(std::max(fitting_cells, 1)));
  const bool parallel_forks = engine.concurrent_cache_ops();
  for (std::size_t first = 0; first < runnable.size(); first += batch_limit) {
    const std::size_t last = std::min(runnable.size(), first + batch_limit);
    // Compacted forks of the prefilled cache, one per cell (in parallel where the engine allows).
    std::vector<std::unique_ptr<SequenceCache>> slots(last - first);
    const std::ptrdiff_t slot_count = static_cast<std::ptrdiff_t>(slots.size());
#pragma omp parallel for schedule(dynamic, 1) if (parallel_forks && slot_count > 1)
    for (std::ptrdiff_t k = 0; k < slot_count; ++k) {
      const std::size_t i = runnable[first + static_cast<std::size_t>(k)];
      CellResult& result = unit.cells[i];
      const Clock::time_point fork_start = Clock::now();
      try {
        std::unique_ptr<SequenceCache> cache = prefilled->fork();
        cache->truncate(result.boundary);
        const methods::Selection* selection = selections[i] ? &*selections[i] : nullptr;
        const bool evicted = evict_cell(engine, cells[i], selection, *cache, result);
        result.evict_seconds = seconds_since(fork_start);
        if (!evicted) continue;
        if (options.kept_digest)
          result.kept_digest = options.kept_digest(selection, result.boundary);
        if (options.keep_selections && selection != nullptr) result.selection = *selection;
        slots[static_cast<std::size_t>(k)] = std::move(cache);
      } catch (const std::exception& error) {  // e.g. out of memory for the copy
        result.evict_seconds = seconds_since(fork_start);
        result.status = CellStatus::failed;
        result.error = std::string("could not build the cell's cache: ") + error.what();
      }
    }
    std::vector<std::size_t> batch;  // cell indices whose cache is ready
    std::vector<SequenceCache*> caches;
    std::vector<std::vector<std::int32_t>> feeds;
    for (std::size_t k = 0; k < slots.size(); ++k) {
      if (!slots[k]) continue;
      const std::size_t i = runnable[first + k];
      caches.push_back(slots[k].get());
      feeds.push_back(plan.feed(cells[i], tokens));
      batch.push_back(i);
    }
    if (batch.empty()) continue;
    std::vector<std::span<const std::int32_t>> feed_spans(feeds.begin(), feeds.end());
    phase = Clock::now();
    const std::vector<LogitMatrix> fed = engine.prefill_batch(caches, feed_spans, LogitRows::last);
    const double feed_seconds = seconds_since(phase);
    unit.timings.feed_seconds += feed_seconds;
    share_feed(unit, batch, feeds, feed_seconds);
    LogitMatrix last_logits;
    last_logits.rows = static_cast<int>(batch.size());
    last_logits.vocab = engine.config().vocab_size;
    for (const LogitMatrix& m : fed) {
      last_logits.values.insert(last_logits.values.end(), m.values.begin(), m.values.end());
    }
    phase = Clock::now();
    std::vector<GreedyOutput> outputs =
        generate_greedy_batch(engine, caches, last_logits, greedy_options(options));
    const double decode_seconds = seconds_since(phase);
    unit.timings.decode_seconds += decode_seconds;
    share_decode(unit, batch, caches, outputs, decode_seconds);
    for (std::size_t k = 0; k < batch.size(); ++k) {
      take_output(std::move(outputs[k]), unit.cells[batch[k]]);
    }
  }
  sum_cell_timings(unit);
  unit.timings.total_seconds = seconds_since(start);
  unit.threads = omp_get_max_threads();
  return unit;
}

UnitResult run_unit_naive(InferenceEngine& engine, const model::ModelWeights& weights,
                          const UnitTokens& tokens, std::span<const CellSpec> cells,
                          const UnitRunOptions& options) {
  const Clock::time_point start = Clock::now();
  const UnitPlan plan = plan_unit(engine, weights, tokens, cells, options);
  UnitResult unit;
  unit.context_end = plan.context_end;
  unit.question_end = plan.question_end;
  unit.cells.resize(cells.size());
  (void)engine.max_concurrent_cells(
      {.prefill_tokens = plan.question_end, .capacity = plan.capacity, .cells = 1});

  for (std::size_t i = 0; i < cells.size(); ++i) {
    const CellSpec& cell = cells[i];
    CellResult& result = unit.cells[i];
    result.boundary = plan.boundary(cell);
    const std::span<const std::int32_t> prefix =
        std::span<const std::int32_t>(plan.prompt).first(static_cast<std::size_t>(result.boundary));

    // Its own prefill of the protocol's prefix, with its own capture.
    std::unique_ptr<PrefillCapture> capture;
    if (cell.method != nullptr) {
      CaptureOptions capture_options;
      capture_options.boundaries = {result.boundary};
      capture_options.window_rows =
          cell.method->window_rows_needed(plan.question_end - plan.context_end);
      capture_options.column_sums = cell.method->needs_column_sums();
      capture_options.query_moments = cell.method->needs_query_moments();
      capture_options.attention_cosine = cell.method->needs_attention_cosine();
      capture_options.all_queries = cell.method->needs_all_queries();
      capture_options.attention_input = cell.method->needs_attention_input();
      capture = engine.new_capture(std::move(capture_options));
    }
    const std::unique_ptr<SequenceCache> cache = engine.new_cache(plan.capacity);
    Clock::time_point phase = Clock::now();
    engine.prefill(*cache, prefix, LogitRows::none, capture.get());
    result.prefill_seconds = seconds_since(phase);
    unit.timings.prefill_seconds += result.prefill_seconds;

    std::optional<methods::Selection> selection;
    if (cell.method != nullptr) {
      selection = device_select_cell(cell, *capture, result);
      if (!selection && result.status == CellStatus::ok) {
        const Clock::time_point view_start = Clock::now();
        const std::vector<methods::LayerCapture> layers =
            capture->layers(result.boundary, *cache, weights, engine.rope_inv_freq());
        result.capture_seconds = seconds_since(view_start);
        unit.timings.capture_seconds += result.capture_seconds;
        std::optional<ExtraPassOutcome> pass;  // the cell's own extra pass, if its method has one
        if (cell.method->extra_pass() != nullptr) {
          pass = try_extra_pass(engine, *cell.method->extra_pass(), *cache, result.boundary, layers,
                                plan.prompt, tokens.pass_prompt);
          result.extra_pass_seconds = pass->seconds;
          unit.timings.extra_pass_seconds += pass->seconds;
        }
        const methods::ExtraPassResult* pass_result =
            pass ? pass_for_cell(cell, *pass, result) : nullptr;
        if (!pass || pass_result != nullptr) {
          selection = select_cell(cell, layers, options, result, plan.question_tokens(cell),
                                  nullptr, pass_result);
        }
      }
      if (!selection) continue;
    }
    phase = Clock::now();
    const bool evicted =
        evict_cell(engine, cell, selection ? &*selection : nullptr, *cache, result);
    result.evict_seconds = seconds_since(phase);
    if (!evicted) continue;
    if (options.kept_digest) {
      result.kept_digest = options.kept_digest(selection ? &*selection : nullptr, result.boundary);
    }
    if (options.keep_selections && selection) result.selection = std::move(selection);

    const std::vector<std::int32_t> rest = plan.feed(cell, tokens);
    phase = Clock::now();
    const LogitMatrix last = engine.prefill(*cache, rest, LogitRows::last);
    result.feed_seconds = seconds_since(phase);
    unit.timings.feed_seconds += result.feed_seconds;
    phase = Clock::now();
    take_output(generate_greedy(engine, *cache, last.row(0), greedy_options(options)), result);
    result.decode_seconds = seconds_since(phase);
    unit.timings.decode_seconds += result.decode_seconds;
    result.peak_kv_bytes = static_cast<std::int64_t>(cache->kept_bytes());
  }
  sum_cell_timings(unit);
  unit.timings.total_seconds = seconds_since(start);
  unit.threads = omp_get_max_threads();
  return unit;
}

}  // namespace kvaudit::unit

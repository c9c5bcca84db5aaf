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

#include "methods/dms.h"
#include "methods/score_memo.h"
#include "methods/scorer_method.h"
#include "runners/unit/cost_shares.h"
#include "runners/unit/decoding_compression.h"
#include "runners/unit/dms_decoding.h"
#include "runners/unit/greedy_decoding.h"
#include "runners/unit/prefill_capture.h"

namespace kvaudit::unit {
namespace {

// The cell's method when it is dms with decoding = true (methods/dms.h; it then evicts while
// decoding through DmsDecoding, dms_decoding.h), else nullptr.
const methods::DmsMethod* dms_decoding_method(const CellSpec& cell) {
  const auto* dms = dynamic_cast<const methods::DmsMethod*>(cell.method);
  return dms != nullptr && dms->decoding() ? dms : nullptr;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("unit runner: " + message);
}

void check_tokens(std::span<const std::int32_t> ids, int vocab, const std::string& what) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    require(ids[i] >= 0 && ids[i] < vocab,
            what + " token " + std::to_string(i) + " has id " + std::to_string(ids[i]) +
                ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
  }
}

// Whether the unit is a reuse unit (docs/design/reuse.md): its cells all reuse cells and its
// questions in UnitTokens::reuse_questions. Throws for a list that mixes reuse cells with others
// (one compression per context cannot serve a query-aware cell, and a query-agnostic one has its
// own single question), and for reuse questions without reuse cells or the reverse.
bool is_reuse_unit(const UnitTokens& tokens, std::span<const CellSpec> cells) {
  std::size_t reuse_cells = 0;
  std::size_t first_other = cells.size();
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].protocol == Protocol::reuse) {
      ++reuse_cells;
    } else if (first_other == cells.size()) {
      first_other = i;
    }
  }
  if (reuse_cells == 0) {
    require(tokens.reuse_questions.empty(),
            "the unit has " + std::to_string(tokens.reuse_questions.size()) +
                " reuse questions but none of its cells is a reuse cell");
    return false;
  }
  require(reuse_cells == cells.size(),
          "the unit mixes " + std::to_string(reuse_cells) + " reuse cells with " +
              std::to_string(cells.size() - reuse_cells) + " cells of other protocols (cell " +
              std::to_string(first_other) + " is " +
              std::string(protocol_name(cells[first_other].protocol)) +
              "); a reuse unit's cells must all be reuse cells");
  require(!tokens.reuse_questions.empty(),
          "the unit's cells are reuse cells but it has no reuse questions");
  return true;
}

// Facts shared by both routes.
struct UnitPlan {
  std::vector<std::int32_t> prompt;  // context + question (Lq tokens); a reuse unit: the context
  int context_end = 0;               // Lc
  int question_end = 0;              // Lq; a reuse unit: Lc (its questions differ)
  bool reuse = false;                // a reuse unit (is_reuse_unit)
  CaptureOptions capture;            // boundaries left empty (each route sets its own)
  bool any_method = false;
  // Entries a cell's cache may reach: the prompt, the suffix and the generated tokens (the last
  // generated token is not fed).
  int capacity = 0;

  // Query-agnostic and reuse cells compress the context alone; query-aware ones the question too.
  int boundary(const CellSpec& cell) const {
    return cell.protocol == Protocol::query_aware ? question_end : context_end;
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
  // A reuse unit's tokens fed on top of a cell's compressed context for question `question`.
  static std::vector<std::int32_t> reuse_feed(const UnitTokens& tokens, std::size_t question) {
    const QuestionTokens& asked = tokens.reuse_questions[question];
    std::vector<std::int32_t> ids = asked.question;
    ids.insert(ids.end(), asked.suffix.begin(), asked.suffix.end());
    return ids;
  }
};

UnitPlan plan_unit(const InferenceEngine& engine, const model::ModelWeights& weights,
                   const UnitTokens& tokens, std::span<const CellSpec> cells,
                   const UnitRunOptions& options) {
  require(engine.built_from(weights),
          "the weights '" + weights.source + "' are not the ones the engine was built from");
  const bool reuse = is_reuse_unit(tokens, cells);
  require(!tokens.context.empty(), "the unit has no context tokens");
  if (!reuse) {
    require(!tokens.suffix.empty(),
            "the unit has no suffix tokens (template suffix + answer prefix)");
  }
  for (std::size_t j = 0; j < tokens.reuse_questions.size(); ++j) {
    require(!tokens.reuse_questions[j].suffix.empty(),
            "reuse question " + std::to_string(j) +
                " has no suffix tokens (template suffix + answer prefix)");
  }
  require(options.decode.max_new_tokens >= 0,
          "max_new_tokens is " + std::to_string(options.decode.max_new_tokens) + ", must be >= 0");
  require(options.max_batch_cells >= 0,
          "max_batch_cells is " + std::to_string(options.max_batch_cells) + ", must be >= 0");
  const int vocab = engine.config().vocab_size;
  check_tokens(tokens.context, vocab, "context");
  // Tokens fed after the context: the question and suffix, or a reuse unit's longest pair.
  std::size_t fed = 0;
  if (reuse) {
    for (std::size_t j = 0; j < tokens.reuse_questions.size(); ++j) {
      const QuestionTokens& asked = tokens.reuse_questions[j];
      check_tokens(asked.question, vocab, "reuse question " + std::to_string(j) + " question");
      check_tokens(asked.suffix, vocab, "reuse question " + std::to_string(j) + " suffix");
      fed = std::max(fed, asked.question.size() + asked.suffix.size());
    }
  } else {
    check_tokens(tokens.question, vocab, "question");
    check_tokens(tokens.suffix, vocab, "suffix");
    fed = tokens.question.size() + tokens.suffix.size();
  }
  const std::size_t total =
      tokens.context.size() + fed + static_cast<std::size_t>(options.decode.max_new_tokens) + 1;
  require(total < static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
          "the unit has too many tokens");

  UnitPlan plan;
  plan.reuse = reuse;
  plan.prompt = tokens.context;
  if (!reuse) plan.prompt.insert(plan.prompt.end(), tokens.question.begin(), tokens.question.end());
  plan.context_end = static_cast<int>(tokens.context.size());
  plan.question_end = static_cast<int>(plan.prompt.size());
  plan.capacity = static_cast<int>(total);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (cells[i].decoding == nullptr) continue;
    require(dms_decoding_method(cells[i]) == nullptr,
            "cell " + std::to_string(i) +
                "'s method (dms, decoding = true) evicts while decoding " +
                "by itself; it cannot also have a decoding setting");
    require(cells[i].decoding->method != nullptr,
            "cell " + std::to_string(i) + "'s decoding setting has no method");
    try {
      validate(cells[i].decoding->policy);
    } catch (const std::invalid_argument& error) {
      require(false, "cell " + std::to_string(i) + ": " + error.what());
    }
  }
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
  bool wants_attention_output_gradients() const override {
    return pass_.needs_attention_output_gradients();
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
bool evict_cell(InferenceEngine& engine, const CellSpec& cell, const methods::Selection* selection,
                SequenceCache& cache, CellResult& result) {
  const std::int64_t layers = cache.num_layers(), heads = cache.num_kv_heads();
  result.candidate_entries = static_cast<std::int64_t>(result.boundary) * layers * heads;
  if (selection != nullptr) {
    // RestoreKV (methods/restorekv.h): its restore rows join the full cache first (a forward on
    // the engine: one at a time, also when cells are evicted in parallel) and every head keeps
    // them.
    methods::Selection with_restore_rows;
    if (selection->restore_rows != nullptr) {
      const std::int64_t first = cache.original_length();
      std::string restore_error;  // (an exception must not leave the critical section)
#pragma omp critical(kvaudit_engine_forward)
      {
        try {
          engine.append_restore_rows(cache, *selection->restore_rows);
        } catch (const std::exception& error) {
          restore_error = error.what();
        }
      }
      if (!restore_error.empty()) {
        result.status = CellStatus::failed;
        result.error = "method " + cell.method->name() + ": " + restore_error;
        return false;
      }
      with_restore_rows.kept = selection->kept;
      for (auto& layer : with_restore_rows.kept)
        for (auto& head : layer)
          for (std::int64_t p = first; p < cache.original_length(); ++p)
            head.push_back(static_cast<std::int32_t>(p));
    }
    try {
      cache.retain(selection->restore_rows != nullptr ? with_restore_rows : *selection);
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
    cell.final_kv_bytes = cell.peak_kv_bytes;
  }
}

std::vector<std::size_t> all_cells(std::size_t count) {
  std::vector<std::size_t> indices(count);
  for (std::size_t i = 0; i < count; ++i) indices[i] = i;
  return indices;
}

// What steps 1–2 of the fan-out leave: the prefilled cache (Lq tokens; a reuse unit's Lc), the
// capture it was observed by, and each cell's selection (nullopt for a full-KV or failed cell).
struct SelectedUnit {
  std::unique_ptr<PrefillCapture> capture;
  std::unique_ptr<SequenceCache> prefilled;
  std::vector<std::optional<methods::Selection>> selections;
};

// The fan-out prefill's capture: plan.capture at the boundaries of the evicting cells (none when
// no cell evicts). Also what the engine plans its memory for (UnitDemand::capture).
CaptureOptions fan_out_capture(const UnitPlan& plan, std::span<const CellSpec> cells) {
  CaptureOptions capture_options;
  if (!plan.any_method) return capture_options;
  capture_options = plan.capture;
  for (const CellSpec& cell : cells) {
    if (cell.method != nullptr) capture_options.boundaries.push_back(plan.boundary(cell));
  }
  return capture_options;
}

// Fan-out steps 1–2 with one result per cell in `unit` (its boundary, selection time and costs,
// or why it failed).
SelectedUnit prefill_and_select(InferenceEngine& engine, const model::ModelWeights& weights,
                                const UnitTokens& tokens, std::span<const CellSpec> cells,
                                const UnitRunOptions& options, const UnitPlan& plan,
                                UnitResult& unit) {
  SelectedUnit selected;
  // 1. One prefill over context + question, captured at the boundaries the evicting cells need.
  if (plan.any_method) selected.capture = engine.new_capture(fan_out_capture(plan, cells));
  selected.prefilled = engine.new_cache(plan.capacity);
  const SequenceCache& prefilled = *selected.prefilled;
  const Clock::time_point phase = Clock::now();
  engine.prefill(*selected.prefilled, plan.prompt, LogitRows::none, selected.capture.get());
  unit.timings.prefill_seconds = seconds_since(phase);
  share_step(unit, all_cells(cells.size()), unit.timings.prefill_seconds,
             &CellResult::prefill_seconds, kPrefillShare);

  // 2. Selections. First the capture's device fast paths (one after another: they share the
  // engine's stream), then every other evicting cell's Method::select on the views of its
  // boundary (built once per boundary). Those are independent: they run in parallel
  // (Method::select is const; methods keep no state), each writing only its own result.
  std::vector<std::optional<methods::Selection>>& selections = selected.selections;
  selections.resize(cells.size());
  std::vector<bool> on_host(cells.size(), false);
  std::map<int, std::vector<methods::LayerCapture>> views;
  std::map<int, std::vector<std::size_t>> view_users;  // boundary -> the cells selecting on it
  std::map<int, double> view_seconds;                  // boundary -> time to build its views
  for (std::size_t i = 0; i < cells.size(); ++i) {
    CellResult& result = unit.cells[i];
    result.boundary = plan.boundary(cells[i]);
    if (cells[i].method == nullptr) continue;
    selections[i] = device_select_cell(cells[i], *selected.capture, result);
    if (selections[i] || result.status != CellStatus::ok) continue;
    on_host[i] = true;
    view_users[result.boundary].push_back(i);
    if (!views.contains(result.boundary)) {
      const Clock::time_point view_start = Clock::now();
      views.emplace(result.boundary, selected.capture->layers(result.boundary, prefilled, weights,
                                                              engine.rope_inv_freq()));
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
                           try_extra_pass(engine, *pass, prefilled, b, views.at(b), plan.prompt,
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
  return selected;
}

// A cell's decode-time method, guarded so that its failure fails that cell alone: the batch's
// compressing cells decode together in one generate_greedy_compressing call, which a throwing
// select (or a selection the cache would reject) would abort for all of them. After its first
// failure it keeps every entry, so the cell decodes on uncompressed and its result is dropped.
// generate_greedy_compressing compresses its sequences one after another, and each guard serves
// one sequence, so the mutable error needs no lock. CAM reaches its base scores through it
// (CamScoreSource), guarded the same way.
class GuardedDecodingMethod final : public methods::Method, public CamScoreSource {
 public:
  explicit GuardedDecodingMethod(const methods::Method& method)
      : method_(method), scorer_method_(dynamic_cast<const methods::ScorerMethod*>(&method)) {}

  bool cam_capable() const override { return scorer_method_ != nullptr; }
  std::optional<std::vector<float>> cam_scores(
      const methods::LayerCapture& layer, const methods::Budget& budget,
      const methods::SelectionContext& context) const override {
    if (!error_.empty() || scorer_method_ == nullptr) return std::nullopt;
    try {
      return methods::score_layer(scorer_method_->scorer(), layer, budget, context);
    } catch (const std::exception& error) {
      error_ = error.what();
    }
    return std::nullopt;
  }

  methods::Selection select(std::span<const methods::LayerCapture> layers,
                            const methods::Budget& budget,
                            const methods::SelectionContext& context) const override {
    if (error_.empty()) {
      try {
        methods::Selection chosen = method_.select(layers, budget, context);
        error_ = selection_problem(chosen, layers);
        if (error_.empty()) return chosen;
      } catch (const std::exception& error) {
        error_ = error.what();
      }
    }
    methods::Selection all;
    for (const methods::LayerCapture& layer : layers) {
      std::vector<std::int32_t> every(static_cast<std::size_t>(layer.length));
      for (std::size_t j = 0; j < every.size(); ++j) every[j] = static_cast<std::int32_t>(j);
      all.kept.emplace_back(static_cast<std::size_t>(layer.num_kv_heads), every);
    }
    return all;
  }
  std::string name() const override { return method_.name(); }
  // Why its method failed (empty while it has not).
  const std::string& error() const { return error_; }

 private:
  // What retain() would reject in a selection of indices into `layers`' entries.
  static std::string selection_problem(const methods::Selection& chosen,
                                       std::span<const methods::LayerCapture> layers) {
    if (chosen.kept.size() != layers.size()) return "returned a selection of another shape";
    for (std::size_t l = 0; l < layers.size(); ++l) {
      if (chosen.kept[l].size() != static_cast<std::size_t>(layers[l].num_kv_heads))
        return "returned a selection of another shape";
      for (const std::vector<std::int32_t>& head : chosen.kept[l]) {
        for (std::size_t j = 0; j < head.size(); ++j) {
          if (head[j] < 0 || head[j] >= layers[l].length || (j > 0 && head[j] <= head[j - 1]))
            return "returned kept indices that are not strictly ascending in [0, " +
                   std::to_string(layers[l].length) + ")";
        }
      }
    }
    return {};
  }

  const methods::Method& method_;
  const methods::ScorerMethod* scorer_method_;
  mutable std::string error_;
};

// Why `cache` cannot be compressed while decoding (empty when it can): an engine whose cache does
// not expose its entries, or a layer whose KV heads hold different numbers of entries (after a
// head-adaptive prefill method), which one decode-time view per layer cannot describe. Checked
// before the batch decodes, because generate_greedy_compressing would throw for the whole batch.
std::string decode_compression_problem(const SequenceCache& cache) {
  try {
    for (int layer = 0; layer < cache.num_layers(); ++layer) {
      const std::size_t first = cache.head_entries(layer, 0).positions.size();
      for (int head = 1; head < cache.num_kv_heads(); ++head) {
        const std::size_t held = cache.head_entries(layer, head).positions.size();
        if (held != first)
          return "layer " + std::to_string(layer) + " KV head " + std::to_string(head) + " holds " +
                 std::to_string(held) + " entries but head 0 holds " + std::to_string(first) +
                 " (a head-adaptive prefill method cannot precede decode-time compression)";
      }
    }
  } catch (const std::exception& error) {
    return error.what();
  }
  return {};
}

void fail_decoding_cell(CellResult& cell, const std::string& why) {
  cell.status = CellStatus::failed;
  cell.error = "decode-time compression failed: " + why;
}

// The batch's cells without a decoding setting: greedy decoding together, each cache growing.
void decode_plain(InferenceEngine& engine, const UnitRunOptions& options, UnitResult& unit,
                  std::span<const std::size_t> batch, std::span<SequenceCache* const> caches,
                  std::span<const std::span<const float>> first_logits) {
  LogitMatrix last_logits;
  last_logits.rows = static_cast<int>(batch.size());
  last_logits.vocab = engine.config().vocab_size;
  for (const std::span<const float> row : first_logits) {
    last_logits.values.insert(last_logits.values.end(), row.begin(), row.end());
  }
  const Clock::time_point phase = Clock::now();
  std::vector<GreedyOutput> outputs =
      generate_greedy_batch(engine, caches, last_logits, greedy_options(options));
  const double decode_seconds = seconds_since(phase);
  unit.timings.decode_seconds += decode_seconds;
  share_decode(unit, batch, caches, outputs, decode_seconds);
  for (std::size_t k = 0; k < batch.size(); ++k) {
    take_output(std::move(outputs[k]), unit.cells[batch[k]]);
  }
}

// The batch's cells with a decoding setting (docs/design/decoding.md): greedy decoding together
// through generate_greedy_compressing, each with its own method and policy and the selection
// context of its prefill selection (seed, cell_key). The decode steps are shared as plain decoding
// shares them (the rest of the wall time, less the compressions, in equal shares); each cell's
// compressions and the check of its cache before decoding are its own cost (compression_seconds).
// A cell whose cache cannot be compressed or whose method fails while decoding fails alone; an
// engine that cannot observe decode steps fails them all (the engine's message).
// dms[k] (parallel to batch; nullptr for none): a DMS-with-decoding cell's state after its feed
// (dms_decoding.h), which then replaces the decoding setting; its heads may hold different counts.
void decode_compressing(InferenceEngine& engine, std::span<const CellSpec> cells,
                        const UnitRunOptions& options, UnitResult& unit,
                        std::span<const std::size_t> batch, std::span<SequenceCache* const> caches,
                        std::span<const std::span<const float>> first_logits,
                        std::span<DmsDecoding* const> dms) {
  std::vector<std::size_t> members;  // indices into batch of the cells that can decode
  std::vector<std::unique_ptr<GuardedDecodingMethod>> guards;
  std::vector<CompressingSequence> sequences;
  std::vector<double> check_seconds;  // each member's decode_compression_problem
  for (std::size_t k = 0; k < batch.size(); ++k) {
    CellResult& cell = unit.cells[batch[k]];
    const CellSpec& spec = cells[static_cast<std::size_t>(cell.cell)];
    const Clock::time_point check_start = Clock::now();
    const std::string problem =
        dms[k] != nullptr ? std::string() : decode_compression_problem(*caches[k]);
    const double checked = seconds_since(check_start);
    if (!problem.empty()) {
      fail_decoding_cell(cell, problem);
      continue;
    }
    if (dms[k] == nullptr && spec.decoding->policy.merge_budget > 0 &&
        dynamic_cast<const methods::ScorerMethod*>(spec.decoding->method) == nullptr) {
      fail_decoding_cell(cell, "CAM (merge_budget " +
                                   std::to_string(spec.decoding->policy.merge_budget) +
                                   ") needs a plain scorer method as its base press, not " +
                                   spec.decoding->method->name());
      continue;
    }
    guards.push_back(std::make_unique<GuardedDecodingMethod>(
        dms[k] != nullptr ? *spec.method : *spec.decoding->method));
    members.push_back(k);
    check_seconds.push_back(checked);
    sequences.push_back({.cache = caches[k],
                         .last_logits = first_logits[k],
                         .method = guards.back().get(),
                         .policy = dms[k] != nullptr ? DecodingPolicy{} : spec.decoding->policy,
                         .context = {.seed = options.seed, .cell_key = spec.cell_key},
                         .dms = dms[k]});
  }
  if (sequences.empty()) return;
  const Clock::time_point phase = Clock::now();
  std::vector<CompressingOutput> outputs;
  try {
    outputs = generate_greedy_compressing(engine, sequences, greedy_options(options));
  } catch (const std::exception& error) {
    unit.timings.decode_seconds += seconds_since(phase);
    for (const std::size_t k : members) fail_decoding_cell(unit.cells[batch[k]], error.what());
    return;
  }
  const double decode_seconds = seconds_since(phase);
  unit.timings.decode_seconds += decode_seconds;
  double compression_seconds = 0.0;
  std::vector<double> step_shares;
  for (const CompressingOutput& output : outputs) {
    compression_seconds += output.compression_seconds;
    step_shares.push_back(output.greedy.decode_step_seconds);
  }
  const std::vector<double> shares =
      complete_shares(std::max(decode_seconds - compression_seconds, 0.0), step_shares);
  for (std::size_t m = 0; m < members.size(); ++m) {
    CellResult& cell = unit.cells[batch[members[m]]];
    if (!guards[m]->error().empty()) {
      fail_decoding_cell(cell, "method " + guards[m]->name() + " failed: " + guards[m]->error());
      continue;
    }
    CompressingOutput& output = outputs[m];
    cell.decode_seconds = shares[m];
    if (members.size() > 1) cell.shared_costs |= kDecodeShare;
    // (a DMS cell's feed already set its own: the eviction after the rest)
    cell.compression_seconds =
        (std::isnan(cell.compression_seconds) ? 0.0 : cell.compression_seconds) + check_seconds[m] +
        output.compression_seconds;
    cell.peak_kv_bytes = static_cast<std::int64_t>(output.peak_kept_bytes);
    cell.final_kv_bytes = static_cast<std::int64_t>(output.final_kept_bytes);
    cell.decode_compressions = output.compressions;
    take_output(std::move(output.greedy), cell);
  }
}

// Feeds each cache of a batch its tokens together, then decodes them: the cells without a decoding
// setting together as greedy decoding does, then those with one together through
// generate_greedy_compressing (two groups, so the first decode exactly as they would in a batch
// of their own). `batch` holds the indices of their results in `unit`; selections[k] the prefill
// selection of cell batch[k] (nullptr for a full-KV cell). A DMS-with-decoding cell
// (dms_decoding_method) is fed on its own through DmsDecoding::feed — an observed prefill whose
// new entries it scores and evicts from, its own feed cost and, for the eviction, compression
// cost — then decodes with the compressing group; an engine that cannot observe the feed fails it.
void feed_and_decode(InferenceEngine& engine, std::span<const CellSpec> cells,
                     const UnitRunOptions& options, UnitResult& unit,
                     std::span<const std::size_t> batch, std::span<SequenceCache* const> caches,
                     std::span<const std::vector<std::int32_t>> feeds,
                     std::span<const methods::Selection* const> selections) {
  auto spec_of = [&](std::size_t k) -> const CellSpec& {
    return cells[static_cast<std::size_t>(unit.cells[batch[k]].cell)];
  };
  std::vector<LogitMatrix> fed(batch.size());
  std::vector<std::size_t> together;  // indices into batch fed by one prefill_batch
  for (std::size_t k = 0; k < batch.size(); ++k)
    if (dms_decoding_method(spec_of(k)) == nullptr) together.push_back(k);
  if (!together.empty()) {
    std::vector<std::size_t> shared_batch;
    std::vector<SequenceCache*> shared_caches;
    std::vector<std::vector<std::int32_t>> shared_feeds;
    std::vector<std::span<const std::int32_t>> feed_spans;
    for (const std::size_t k : together) {
      shared_batch.push_back(batch[k]);
      shared_caches.push_back(caches[k]);
      shared_feeds.push_back(feeds[k]);
      feed_spans.emplace_back(feeds[k]);
    }
    const Clock::time_point phase = Clock::now();
    std::vector<LogitMatrix> logits =
        engine.prefill_batch(shared_caches, feed_spans, LogitRows::last);
    const double feed_seconds = seconds_since(phase);
    unit.timings.feed_seconds += feed_seconds;
    share_feed(unit, shared_batch, shared_feeds, feed_seconds);
    for (std::size_t j = 0; j < together.size(); ++j) fed[together[j]] = std::move(logits[j]);
  }
  std::vector<std::unique_ptr<DmsDecoding>> dms_states(batch.size());
  for (std::size_t k = 0; k < batch.size(); ++k) {
    const methods::DmsMethod* dms = dms_decoding_method(spec_of(k));
    if (dms == nullptr) continue;
    CellResult& cell = unit.cells[batch[k]];
    const Clock::time_point phase = Clock::now();
    try {
      if (selections[k] == nullptr)
        throw std::logic_error("the cell has no prefill selection to start from");
      dms_states[k] = std::make_unique<DmsDecoding>(
          engine.config(), *dms, spec_of(k).budget.threshold, *selections[k], cell.boundary,
          methods::SelectionContext{.seed = options.seed, .cell_key = spec_of(k).cell_key});
      std::optional<CompressionEvent> event;
      fed[k] = dms_states[k]->feed(engine, *caches[k], feeds[k], event);
      const double seconds = seconds_since(phase);
      const double evicting = event ? event->seconds : 0.0;
      cell.feed_seconds = seconds - evicting;
      cell.compression_seconds = evicting;
      unit.timings.feed_seconds += seconds;
    } catch (const std::exception& error) {
      unit.timings.feed_seconds += seconds_since(phase);
      dms_states[k].reset();
      cell.status = CellStatus::failed;
      cell.error = std::string("dms decoding failed: ") + error.what();
    }
  }
  std::vector<std::size_t> plain_batch, compressing_batch;
  std::vector<SequenceCache*> plain_caches, compressing_caches;
  std::vector<std::span<const float>> plain_logits, compressing_logits;
  std::vector<DmsDecoding*> compressing_dms;
  for (std::size_t k = 0; k < batch.size(); ++k) {
    if (unit.cells[batch[k]].status != CellStatus::ok) continue;
    const bool compressing = spec_of(k).decoding != nullptr || dms_states[k] != nullptr;
    (compressing ? compressing_batch : plain_batch).push_back(batch[k]);
    (compressing ? compressing_caches : plain_caches).push_back(caches[k]);
    (compressing ? compressing_logits : plain_logits).push_back(fed[k].row(0));
    if (compressing) compressing_dms.push_back(dms_states[k].get());
  }
  if (!plain_batch.empty()) {
    decode_plain(engine, options, unit, plain_batch, plain_caches, plain_logits);
  }
  if (!compressing_batch.empty()) {
    decode_compressing(engine, cells, options, unit, compressing_batch, compressing_caches,
                       compressing_logits, compressing_dms);
  }
}

// A reuse cell's result as its question's row (docs/design/reuse.md §Fan-out): the cell's
// compression fields and status, and its shares of the unit's steps split equally over its
// `questions` rows (the CostShare bits of a step shared by more than one row set); the row's own
// fork (already in row.evict_seconds), feed and decode stay its own.
void fill_reuse_row(const CellSpec& spec, const CellResult& cell, bool template_built,
                    std::size_t questions, CellResult& row) {
  row.boundary = cell.boundary;
  row.candidate_entries = cell.candidate_entries;
  row.kept_entries = cell.kept_entries;
  row.kept_bytes = cell.kept_bytes;
  row.realised_retention = cell.realised_retention;
  row.kept_digest = cell.kept_digest;
  row.selection = cell.selection;
  if (cell.status != CellStatus::ok) {
    row.status = cell.status;
    row.error = cell.error;
  }
  const double k = static_cast<double>(questions);
  row.prefill_seconds = cell.prefill_seconds / k;
  row.capture_seconds = cell.capture_seconds / k;
  row.extra_pass_seconds = cell.extra_pass_seconds / k;
  row.select_seconds = cell.select_seconds / k;
  row.evict_seconds += cell.evict_seconds / k;
  row.shared_costs |= cell.shared_costs;
  if (questions > 1) {
    row.shared_costs |= kPrefillShare;
    if (!std::isnan(cell.capture_seconds)) row.shared_costs |= kCaptureShare;
    if (!std::isnan(cell.extra_pass_seconds)) row.shared_costs |= kExtraPassShare;
    if (spec.method != nullptr) row.shared_costs |= kSelectShare;
    if (spec.method != nullptr && template_built) row.shared_costs |= kEvictShare;
  }
}

// The fan-out of a reuse unit (docs/design/reuse.md §Fan-out): steps 1–2 once per unit at
// b = Lc (plan.prompt is the context alone), then per cell one eviction into its template cache
// (a full-KV cell's template is the prefilled cache itself), and per (cell, question) row a fork
// of its template fed question j + suffix j and decoded, rows batched as cells are otherwise.
// A cell's template is built when its first row's batch comes and dropped when its last row
// takes it over (that row needs no fork).
UnitResult run_reuse_fan_out(InferenceEngine& engine, const model::ModelWeights& weights,
                             const UnitTokens& tokens, std::span<const CellSpec> cells,
                             const UnitRunOptions& options, const UnitPlan& plan) {
  const std::size_t questions = tokens.reuse_questions.size();
  const std::size_t row_count = cells.size() * questions;
  UnitResult unit;
  unit.context_end = plan.context_end;
  unit.question_end = plan.question_end;
  unit.cells.resize(row_count);
  for (std::size_t r = 0; r < row_count; ++r) {
    unit.cells[r].cell = static_cast<int>(r / questions);
    unit.cells[r].question = static_cast<int>(r % questions);
    unit.cells[r].n_questions = static_cast<int>(questions);
  }
  // Caches beside the prefilled one: the rows' and the cells' templates.
  const int fitting_caches =
      engine.max_concurrent_cells({.prefill_tokens = plan.question_end,
                                   .capacity = plan.capacity,
                                   .cells = static_cast<int>(row_count + cells.size()),
                                   .capture = fan_out_capture(plan, cells)});

  // Steps 1–2, one result per cell.
  UnitResult per_cell;
  per_cell.cells.resize(cells.size());
  SelectedUnit selected =
      prefill_and_select(engine, weights, tokens, cells, options, plan, per_cell);
  unit.timings = per_cell.timings;

  // 3–4. Per batch of rows: the templates its rows need, a fork per row, feed and decode together.
  std::vector<std::size_t> runnable;
  for (std::size_t r = 0; r < row_count; ++r) {
    if (per_cell.cells[r / questions].status == CellStatus::ok) runnable.push_back(r);
  }
  std::size_t batch_limit = options.max_batch_cells > 0
                                ? static_cast<std::size_t>(options.max_batch_cells)
                                : std::max<std::size_t>(runnable.size(), 1);
  // When not every row and template fits at once, a batch of R rows keeps at most R templates.
  const std::size_t all_caches = row_count + cells.size();
  const std::size_t fitting = static_cast<std::size_t>(std::max(fitting_caches, 1));
  if (fitting < all_caches)
    batch_limit = std::min(batch_limit, std::max<std::size_t>(fitting / 2, 1));
  const bool parallel_forks = engine.concurrent_cache_ops();
  std::vector<std::unique_ptr<SequenceCache>> templates(cells.size());
  std::vector<bool> template_built(cells.size(), false);
  for (std::size_t first = 0; first < runnable.size(); first += batch_limit) {
    const std::size_t last = std::min(runnable.size(), first + batch_limit);
    // The cells whose first rows are in this batch (rows are in cell order) get their template.
    std::vector<std::size_t> to_build;
    for (std::size_t k = first; k < last; ++k) {
      const std::size_t i = runnable[k] / questions;
      if (!template_built[i] && (to_build.empty() || to_build.back() != i)) to_build.push_back(i);
    }
    const std::ptrdiff_t build_count = static_cast<std::ptrdiff_t>(to_build.size());
#pragma omp parallel for schedule(dynamic, 1) if (parallel_forks && build_count > 1)
    for (std::ptrdiff_t t = 0; t < build_count; ++t) {
      const std::size_t i = to_build[static_cast<std::size_t>(t)];
      CellResult& result = per_cell.cells[i];
      const methods::Selection* selection =
          selected.selections[i] ? &*selected.selections[i] : nullptr;
      const Clock::time_point evict_start = Clock::now();
      try {
        bool evicted = false;
        if (cells[i].method == nullptr) {  // the prefilled cache as it is: counts only
          evicted = evict_cell(engine, cells[i], nullptr, *selected.prefilled, result);
        } else {
          std::unique_ptr<SequenceCache> cache = selected.prefilled->fork();
          cache->truncate(result.boundary);
          evicted = evict_cell(engine, cells[i], selection, *cache, result);
          result.evict_seconds = seconds_since(evict_start);
          if (evicted) templates[i] = std::move(cache);
        }
        if (!evicted) continue;
        if (options.kept_digest) {
          result.kept_digest = options.kept_digest(selection, result.boundary);
        }
        if (options.keep_selections && selection != nullptr) result.selection = *selection;
      } catch (const std::exception& error) {  // e.g. out of memory for the copy
        result.evict_seconds = seconds_since(evict_start);
        result.status = CellStatus::failed;
        result.error = std::string("could not build the cell's cache: ") + error.what();
      }
    }
    for (const std::size_t i : to_build) template_built[i] = true;

    // A fork of its cell's template per row (in parallel where the engine allows); the last row
    // of an evicting cell takes the template itself afterwards.
    std::vector<std::unique_ptr<SequenceCache>> slots(last - first);
    const auto takes_template = [&](std::size_t r) {
      return cells[r / questions].method != nullptr && r % questions == questions - 1;
    };
    const std::ptrdiff_t slot_count = static_cast<std::ptrdiff_t>(slots.size());
#pragma omp parallel for schedule(dynamic, 1) if (parallel_forks && slot_count > 1)
    for (std::ptrdiff_t k = 0; k < slot_count; ++k) {
      const std::size_t r = runnable[first + static_cast<std::size_t>(k)];
      const std::size_t i = r / questions;
      if (per_cell.cells[i].status != CellStatus::ok || takes_template(r)) continue;
      const SequenceCache& source =
          cells[i].method == nullptr ? *selected.prefilled : *templates[i];
      CellResult& row = unit.cells[r];
      const Clock::time_point fork_start = Clock::now();
      try {
        slots[static_cast<std::size_t>(k)] = source.fork();
        row.evict_seconds = seconds_since(fork_start);
      } catch (const std::exception& error) {
        row.evict_seconds = seconds_since(fork_start);
        row.status = CellStatus::failed;
        row.error = std::string("could not copy the cell's compressed cache: ") + error.what();
      }
    }
    for (std::size_t k = 0; k < slots.size(); ++k) {
      const std::size_t r = runnable[first + k];
      const std::size_t i = r / questions;
      if (per_cell.cells[i].status == CellStatus::ok && takes_template(r)) {
        slots[k] = std::move(templates[i]);
      }
    }

    std::vector<std::size_t> batch;  // row indices whose cache is ready
    std::vector<SequenceCache*> caches;
    std::vector<std::vector<std::int32_t>> feeds;
    std::vector<const methods::Selection*> selections;  // the rows' cells' prefill selections
    for (std::size_t k = 0; k < slots.size(); ++k) {
      if (!slots[k]) continue;
      const std::size_t r = runnable[first + k];
      caches.push_back(slots[k].get());
      feeds.push_back(UnitPlan::reuse_feed(tokens, r % questions));
      batch.push_back(r);
      const auto& chosen = selected.selections[r / questions];
      selections.push_back(chosen ? &*chosen : nullptr);
      // (fill_reuse_row sets the rest of the row's cell fields after decoding; a DMS feed needs
      // the boundary now)
      unit.cells[r].boundary = per_cell.cells[r / questions].boundary;
    }
    if (!batch.empty())
      feed_and_decode(engine, cells, options, unit, batch, caches, feeds, selections);
  }
  for (std::size_t r = 0; r < row_count; ++r) {
    const std::size_t i = r / questions;
    fill_reuse_row(cells[i], per_cell.cells[i], template_built[i], questions, unit.cells[r]);
  }
  sum_cell_timings(unit);
  return unit;
}

// The naive route for one cell (its own prefill of b tokens and capture, selection, retain, feed
// of the rest, single-sequence decode), into `result` and `timings`.
void run_naive_cell(InferenceEngine& engine, const model::ModelWeights& weights,
                    const UnitPlan& plan, const UnitTokens& tokens, const CellSpec& cell,
                    const UnitRunOptions& options, CellResult& result, UnitTimings& timings) {
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
  timings.prefill_seconds += result.prefill_seconds;

  std::optional<methods::Selection> selection;
  if (cell.method != nullptr) {
    selection = device_select_cell(cell, *capture, result);
    if (!selection && result.status == CellStatus::ok) {
      const Clock::time_point view_start = Clock::now();
      const std::vector<methods::LayerCapture> layers =
          capture->layers(result.boundary, *cache, weights, engine.rope_inv_freq());
      result.capture_seconds = seconds_since(view_start);
      timings.capture_seconds += result.capture_seconds;
      std::optional<ExtraPassOutcome> pass;  // the cell's own extra pass, if its method has one
      if (cell.method->extra_pass() != nullptr) {
        pass = try_extra_pass(engine, *cell.method->extra_pass(), *cache, result.boundary, layers,
                              plan.prompt, tokens.pass_prompt);
        result.extra_pass_seconds = pass->seconds;
        timings.extra_pass_seconds += pass->seconds;
      }
      const methods::ExtraPassResult* pass_result =
          pass ? pass_for_cell(cell, *pass, result) : nullptr;
      if (!pass || pass_result != nullptr) {
        selection = select_cell(cell, layers, options, result, plan.question_tokens(cell), nullptr,
                                pass_result);
      }
    }
    if (!selection) return;
  }
  phase = Clock::now();
  const bool evicted = evict_cell(engine, cell, selection ? &*selection : nullptr, *cache, result);
  result.evict_seconds = seconds_since(phase);
  if (!evicted) return;
  if (options.kept_digest) {
    result.kept_digest = options.kept_digest(selection ? &*selection : nullptr, result.boundary);
  }
  if (options.keep_selections && selection) result.selection = selection;

  const std::vector<std::int32_t> rest = plan.feed(cell, tokens);
  if (dms_decoding_method(cell) != nullptr) {  // fed and decoded as a batch of one
    const int cell_index = result.cell;
    UnitResult alone;
    alone.cells.push_back(std::move(result));
    alone.cells.front().cell = 0;
    const std::size_t only[] = {0};
    SequenceCache* const caches[] = {cache.get()};
    const std::vector<std::int32_t> feeds[] = {rest};
    const methods::Selection* const chosen[] = {selection ? &*selection : nullptr};
    feed_and_decode(engine, {&cell, 1}, options, alone, only, caches, feeds, chosen);
    result = std::move(alone.cells.front());
    result.cell = cell_index;
    timings.feed_seconds += alone.timings.feed_seconds;
    timings.decode_seconds += alone.timings.decode_seconds;
    return;
  }
  phase = Clock::now();
  const LogitMatrix last = engine.prefill(*cache, rest, LogitRows::last);
  result.feed_seconds = seconds_since(phase);
  timings.feed_seconds += result.feed_seconds;
  if (cell.decoding != nullptr) {  // the compressing batch of one (decode_compressing)
    const int cell_index = result.cell;
    UnitResult alone;
    alone.cells.push_back(std::move(result));
    alone.cells.front().cell = 0;
    const std::size_t only[] = {0};
    SequenceCache* const caches[] = {cache.get()};
    const std::span<const float> first_logits[] = {last.row(0)};
    DmsDecoding* const no_dms[] = {nullptr};
    decode_compressing(engine, {&cell, 1}, options, alone, only, caches, first_logits, no_dms);
    result = std::move(alone.cells.front());
    result.cell = cell_index;
    timings.decode_seconds += alone.timings.decode_seconds;
    return;
  }
  phase = Clock::now();
  take_output(generate_greedy(engine, *cache, last.row(0), greedy_options(options)), result);
  result.decode_seconds = seconds_since(phase);
  timings.decode_seconds += result.decode_seconds;
  result.peak_kv_bytes = static_cast<std::int64_t>(cache->kept_bytes());
  result.final_kv_bytes = result.peak_kv_bytes;
}

// The naive route of a reuse unit: per (cell, question) the query-agnostic naive route on the
// single-question unit (context, question j, suffix j) — its own prefill of Lc tokens and capture,
// selection, retain, feed, decode (docs/design/reuse.md §Naive route).
void run_reuse_naive(InferenceEngine& engine, const model::ModelWeights& weights,
                     const UnitTokens& tokens, std::span<const CellSpec> cells,
                     const UnitRunOptions& options, UnitResult& unit) {
  const std::size_t questions = tokens.reuse_questions.size();
  for (std::size_t j = 0; j < questions; ++j) {
    UnitTokens single;
    single.context = tokens.context;
    single.question = tokens.reuse_questions[j].question;
    single.suffix = tokens.reuse_questions[j].suffix;
    single.pass_prompt = tokens.pass_prompt;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      CellSpec agnostic = cells[i];
      agnostic.protocol = Protocol::query_agnostic;
      const UnitPlan plan = plan_unit(engine, weights, single, {&agnostic, 1}, options);
      (void)engine.max_concurrent_cells({.prefill_tokens = plan.context_end,
                                         .capacity = plan.capacity,
                                         .cells = 1,
                                         .capture = fan_out_capture(plan, {&agnostic, 1})});
      CellResult& row = unit.cells[i * questions + j];
      row.cell = static_cast<int>(i);
      row.question = static_cast<int>(j);
      row.n_questions = static_cast<int>(questions);
      run_naive_cell(engine, weights, plan, single, agnostic, options, row, unit.timings);
    }
  }
}

}  // namespace

UnitResult run_unit(InferenceEngine& engine, const model::ModelWeights& weights,
                    const UnitTokens& tokens, std::span<const CellSpec> cells,
                    const UnitRunOptions& options) {
  const Clock::time_point start = Clock::now();
  const UnitPlan plan = plan_unit(engine, weights, tokens, cells, options);
  if (plan.reuse) {
    UnitResult unit = run_reuse_fan_out(engine, weights, tokens, cells, options, plan);
    unit.timings.total_seconds = seconds_since(start);
    unit.threads = omp_get_max_threads();
    return unit;
  }
  UnitResult unit;
  unit.context_end = plan.context_end;
  unit.question_end = plan.question_end;
  unit.cells.resize(cells.size());
  for (std::size_t i = 0; i < cells.size(); ++i) unit.cells[i].cell = static_cast<int>(i);
  // How many cells' caches fit at once beside the prefilled one (throws when the unit cannot run).
  const int fitting_cells = engine.max_concurrent_cells({.prefill_tokens = plan.question_end,
                                                         .capacity = plan.capacity,
                                                         .cells = static_cast<int>(cells.size()),
                                                         .capture = fan_out_capture(plan, cells)});

  // 1–2. One prefill with capture; every cell's selection.
  const SelectedUnit selected =
      prefill_and_select(engine, weights, tokens, cells, options, plan, unit);
  const std::vector<std::optional<methods::Selection>>& selections = selected.selections;
  const SequenceCache& prefilled = *selected.prefilled;

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
        std::unique_ptr<SequenceCache> cache = prefilled.fork();
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
    std::vector<const methods::Selection*> batch_selections;
    for (std::size_t k = 0; k < slots.size(); ++k) {
      if (!slots[k]) continue;
      const std::size_t i = runnable[first + k];
      caches.push_back(slots[k].get());
      feeds.push_back(plan.feed(cells[i], tokens));
      batch.push_back(i);
      batch_selections.push_back(selections[i] ? &*selections[i] : nullptr);
    }
    if (!batch.empty())
      feed_and_decode(engine, cells, options, unit, batch, caches, feeds, batch_selections);
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
  if (plan.reuse) {
    unit.cells.resize(cells.size() * tokens.reuse_questions.size());
    run_reuse_naive(engine, weights, tokens, cells, options, unit);
  } else {
    unit.cells.resize(cells.size());
    // Each naive cell prefills alone, captured at its own boundary: plan for the largest.
    (void)engine.max_concurrent_cells({.prefill_tokens = plan.question_end,
                                       .capacity = plan.capacity,
                                       .cells = 1,
                                       .capture = fan_out_capture(plan, cells)});
    for (std::size_t i = 0; i < cells.size(); ++i) {
      unit.cells[i].cell = static_cast<int>(i);
      run_naive_cell(engine, weights, plan, tokens, cells[i], options, unit.cells[i], unit.timings);
    }
  }
  sum_cell_timings(unit);
  unit.timings.total_seconds = seconds_since(start);
  unit.threads = omp_get_max_threads();
  return unit;
}

}  // namespace kvaudit::unit

// The reuse protocol in the unit runner (docs/design/reuse.md §Fan-out, §Naive route): a unit of
// one context and several questions of different lengths and suffixes, its cells compressed once
// and each question answered on its own copy of the compressed cache. For every (cell, question)
// the fan-out equals the naive route (its own prefill, selection and decode per question) AND the
// existing query-agnostic fan-out of the single-question unit (context, question j, suffix j):
// identical status, kept sets, kept digests, kept counts and bytes, greedy ids and stop flag — on
// the tiny Llama (f32/bf16 × eager/sdpa) with a plain scorer at two budgets, think (key-channel
// edits), kvzip (an extra pass), finch (window + key re-rotation) and the full-KV cell, and on
// SmolLM2 when its GGUF is present.
// Also: the rows' order and fields, the cost shares and their bits, smaller batches changing
// nothing, a failing cell failing all its rows, and the errors for malformed reuse units.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "methods/finch.h"
#include "methods/knorm.h"
#include "methods/kvzip.h"
#include "methods/scorer_method.h"
#include "methods/snapkv.h"
#include "methods/think.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/chat/prompt_split.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/cost_shares.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_methods.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using cpu::CpuModel;
using testing::describe_cell;
using testing::load_tiny_model;
using testing::random_tokens;

// The single-question unit of question j (the query-agnostic unit reuse must not change).
UnitTokens single_question_unit(const UnitTokens& reuse, std::size_t j) {
  UnitTokens single;
  single.context = reuse.context;
  single.question = reuse.reuse_questions[j].question;
  single.suffix = reuse.reuse_questions[j].suffix;
  single.pass_prompt = reuse.pass_prompt;
  return single;
}

std::vector<CellSpec> as_query_agnostic(std::vector<CellSpec> cells) {
  for (CellSpec& cell : cells) cell.protocol = Protocol::query_agnostic;
  return cells;
}

// Field-by-field equality of one (cell, question) on two routes.
void expect_same_row(const CellResult& a, const CellResult& b, const std::string& where) {
  EXPECT_EQ(a.status, b.status) << where << ": " << a.error << " / " << b.error;
  EXPECT_EQ(a.error, b.error) << where;
  EXPECT_EQ(a.boundary, b.boundary) << where;
  EXPECT_EQ(a.selection.has_value(), b.selection.has_value()) << where;
  if (a.selection && b.selection) {
    EXPECT_TRUE(a.selection->kept == b.selection->kept) << where << ": kept sets differ";
  }
  EXPECT_EQ(a.kept_digest, b.kept_digest) << where << ": kept digests differ";
  EXPECT_EQ(a.candidate_entries, b.candidate_entries) << where;
  EXPECT_EQ(a.kept_entries, b.kept_entries) << where;
  EXPECT_EQ(a.kept_bytes, b.kept_bytes) << where;
  EXPECT_EQ(a.realised_retention, b.realised_retention) << where;
  EXPECT_EQ(a.generated, b.generated) << where << ": greedy outputs differ";
  EXPECT_EQ(a.stopped_on_stop_token, b.stopped_on_stop_token) << where;
  EXPECT_EQ(a.peak_kv_bytes, b.peak_kv_bytes) << where;
}

// Runs the reuse fan-out, the reuse naive route and the single-question query-agnostic fan-out
// of every question; compares them row by row (three legs) and checks the rows' order and that a
// cell's compression fields are equal in all its rows. Returns the fan-out result; `compared`
// grows by the (cell, question) rows compared.
UnitResult expect_reuse_equals_naive_and_single(CpuModel& model, const model::ModelWeights& weights,
                                                const UnitTokens& tokens,
                                                const std::vector<CellSpec>& cells,
                                                UnitRunOptions options, const std::string& where,
                                                int& compared) {
  options.keep_selections = true;
  testing::install_kept_digest(options, weights.config);
  const UnitResult fan_out = run_unit(model, weights, tokens, cells, options);
  const UnitResult naive = run_unit_naive(model, weights, tokens, cells, options);
  const std::size_t k = tokens.reuse_questions.size();
  const int lc = static_cast<int>(tokens.context.size());
  EXPECT_EQ(fan_out.context_end, lc) << where;
  EXPECT_EQ(fan_out.question_end, lc) << where << ": a reuse unit has no common question";
  EXPECT_EQ(naive.question_end, lc) << where;
  EXPECT_EQ(fan_out.cells.size(), cells.size() * k) << where;
  EXPECT_EQ(naive.cells.size(), cells.size() * k) << where;
  if (fan_out.cells.size() != cells.size() * k || naive.cells.size() != cells.size() * k) {
    return fan_out;
  }
  const std::vector<CellSpec> agnostic = as_query_agnostic(cells);
  for (std::size_t j = 0; j < k; ++j) {
    const UnitResult single =
        run_unit(model, weights, single_question_unit(tokens, j), agnostic, options);
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string row_where = where + ": cell " + std::to_string(i) + " (" +
                                    describe_cell(cells[i]) + ") question " + std::to_string(j);
      const CellResult& row = fan_out.cells[i * k + j];
      EXPECT_EQ(row.cell, static_cast<int>(i)) << row_where;
      EXPECT_EQ(row.question, static_cast<int>(j)) << row_where;
      EXPECT_EQ(row.n_questions, static_cast<int>(k)) << row_where;
      EXPECT_EQ(naive.cells[i * k + j].cell, static_cast<int>(i)) << row_where;
      EXPECT_EQ(naive.cells[i * k + j].question, static_cast<int>(j)) << row_where;
      EXPECT_EQ(row.boundary, lc) << row_where;
      if (row.status == CellStatus::ok) {
        EXPECT_NE(row.kept_digest, 0u) << row_where;
      }
      expect_same_row(row, naive.cells[i * k + j], row_where + " (vs naive)");
      expect_same_row(row, single.cells[i], row_where + " (vs single-question query-agnostic)");
      // The cell's compression, shared by its rows.
      const CellResult& first = fan_out.cells[i * k];
      EXPECT_EQ(row.kept_digest, first.kept_digest) << row_where;
      EXPECT_EQ(row.kept_entries, first.kept_entries) << row_where;
      EXPECT_EQ(row.kept_bytes, first.kept_bytes) << row_where;
      EXPECT_EQ(row.select_seconds, first.select_seconds) << row_where;
      ++compared;
    }
  }
  return fan_out;
}

// Four questions of different lengths (one empty) with different suffixes.
UnitTokens tiny_reuse_unit(int vocab, std::uint32_t seed) {
  UnitTokens t;
  t.context = random_tokens(56, vocab, seed);
  const int question_lengths[] = {7, 12, 0, 3};
  const int suffix_lengths[] = {4, 2, 5, 3};
  for (int j = 0; j < 4; ++j) {
    const std::uint32_t s = seed + 10 * static_cast<std::uint32_t>(j + 1);
    t.reuse_questions.push_back({random_tokens(question_lengths[j], vocab, s),
                                 random_tokens(suffix_lengths[j], vocab, s + 1)});
  }
  t.pass_prompt.prefix_length = 3;
  t.pass_prompt.suffix = random_tokens(2, vocab, seed + 3);
  t.pass_prompt.repeat_first = random_tokens(7, vocab, seed + 4);
  t.pass_prompt.repeat_next = random_tokens(9, vocab, seed + 5);
  return t;
}

UnitRunOptions decode(int max_new_tokens) {
  UnitRunOptions options;
  options.decode.max_new_tokens = max_new_tokens;
  options.seed = 19;
  return options;
}

// The real methods the tiny tests run: snapkv (two budgets), knorm, think, kvzip, finch.
struct TinyMethods {
  methods::ScorerMethod snapkv{
      std::make_shared<methods::SnapKvScorer>(methods::SnapKvParams{.window = 16})};
  methods::ScorerMethod knorm{std::make_shared<methods::KnormScorer>()};
  methods::ThinkMethod think{
      methods::ThinkParams{.key_channel_compression_ratio = 0.5, .window_size = 32}};
  methods::KvzipMethod kvzip{[] {
    methods::KvzipParams p;
    p.chunk_size = 32;  // the 53-token context takes two passes
    return p;
  }()};
  // Finch without its question (the last `window` context rows) and with key re-rotation; as
  // make_method builds it, the runner reads rerotate_keys from the recorded parameters.
  std::unique_ptr<methods::FinchMethod> finch = [] {
    const methods::FinchParams params{.window = 4, .rerotate_keys = true};
    auto method = std::make_unique<methods::FinchMethod>(params);
    method->set_parameters(params);
    return method;
  }();

  std::vector<CellSpec> cells() const {
    std::uint64_t key = 1;
    return {{nullptr, {}, Protocol::reuse, key++},
            {&snapkv, {.compression = 0.25}, Protocol::reuse, key++},
            {&snapkv, {.compression = 0.75}, Protocol::reuse, key++},
            {&knorm, {.compression = 0.5}, Protocol::reuse, key++},
            {&think, {.compression = 0.25}, Protocol::reuse, key++},
            {&kvzip, {.compression = 0.5}, Protocol::reuse, key++},
            {finch.get(), {.compression = 0.5}, Protocol::reuse, key++}};
  }
};

TEST(ReuseFanOut, EqualsNaiveAndTheSingleQuestionUnitsOnTheTinyModels) {
  const TinyMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  int compared = 0;
  int answers_differ = 0;  // between questions of one cell: the questions matter
  for (const std::string dtype : {"f32", "bf16"}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
      CpuModel model(weights, backend);
      const UnitTokens tokens = tiny_reuse_unit(model.config().vocab_size, 7);
      const std::string where =
          "tiny llama " + dtype + (backend == AttentionBackend::eager ? " eager" : " sdpa");
      const auto start = std::chrono::steady_clock::now();
      const int before = compared;
      const UnitResult result = expect_reuse_equals_naive_and_single(model, weights, tokens, cells,
                                                                     decode(8), where, compared);
      ASSERT_EQ(result.cells.size(), cells.size() * 4);
      for (const CellResult& row : result.cells) {
        ASSERT_EQ(row.status, CellStatus::ok) << where << " cell " << row.cell << ": " << row.error;
        EXPECT_EQ(row.generated.size(), 8u) << where;
      }
      for (std::size_t i = 0; i < cells.size(); ++i) {
        if (result.cells[i * 4].generated != result.cells[i * 4 + 1].generated) ++answers_differ;
      }
      std::printf("%s: %d (cell, question) rows equal on three routes (%.2f s)\n", where.c_str(),
                  compared - before,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  EXPECT_EQ(compared, 4 * static_cast<int>(cells.size()) * 4);
  EXPECT_GT(answers_differ, 0) << "every cell answered its questions alike: the test is blind";
}

TEST(ReuseFanOut, SmallerBatchesChangeNothing) {
  const TinyMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  CpuModel model(weights, AttentionBackend::sdpa);
  const UnitTokens tokens = tiny_reuse_unit(model.config().vocab_size, 8);
  UnitRunOptions options = decode(6);
  testing::install_kept_digest(options, weights.config);
  const UnitResult all = run_unit(model, weights, tokens, cells, options);
  for (int limit : {1, 2, 3}) {
    options.max_batch_cells = limit;
    const UnitResult batched = run_unit(model, weights, tokens, cells, options);
    ASSERT_EQ(batched.cells.size(), all.cells.size());
    for (std::size_t r = 0; r < all.cells.size(); ++r) {
      expect_same_row(batched.cells[r], all.cells[r],
                      "max_batch_cells " + std::to_string(limit) + " row " + std::to_string(r));
      EXPECT_EQ(batched.cells[r].cell, all.cells[r].cell);
      EXPECT_EQ(batched.cells[r].question, all.cells[r].question);
      // One row per batch: nothing of the feed or the decode is shared.
      if (limit == 1) {
        EXPECT_EQ(batched.cells[r].shared_costs & (kFeedShare | kDecodeShare), 0u);
      }
    }
  }
}

TEST(ReuseFanOut, CostsAreSharedByTheRowsOfTheUnitAndOfTheCell) {
  const TinyMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const UnitTokens tokens = tiny_reuse_unit(model.config().vocab_size, 9);
  const std::size_t k = tokens.reuse_questions.size();
  const UnitResult result = run_unit(model, weights, tokens, cells, decode(4));
  ASSERT_EQ(result.cells.size(), cells.size() * k);
  double prefill = 0.0, capture = 0.0, pass = 0.0, select = 0.0, feed = 0.0, decode_sum = 0.0;
  for (std::size_t r = 0; r < result.cells.size(); ++r) {
    const CellResult& row = result.cells[r];
    const CellSpec& cell = cells[r / k];
    const std::string where = "row " + std::to_string(r) + " (" + describe_cell(cell) + ")";
    ASSERT_EQ(row.status, CellStatus::ok) << where << ": " << row.error;
    // The one prefill: equal shares over all rows.
    EXPECT_DOUBLE_EQ(row.prefill_seconds, result.cells[0].prefill_seconds) << where;
    EXPECT_TRUE(row.shared_costs & kPrefillShare) << where;
    EXPECT_TRUE(row.shared_costs & kFeedShare) << where;
    EXPECT_TRUE(row.shared_costs & kDecodeShare) << where;
    // Select and evict: the cell's, shared by its k rows; the full-KV cell has neither.
    const bool evicting = cell.method != nullptr;
    EXPECT_EQ((row.shared_costs & kSelectShare) != 0, evicting) << where;
    EXPECT_EQ((row.shared_costs & kEvictShare) != 0, evicting) << where;
    EXPECT_EQ(row.select_seconds, result.cells[(r / k) * k].select_seconds) << where;
    EXPECT_EQ(std::isnan(row.capture_seconds), !evicting) << where;
    EXPECT_EQ((row.shared_costs & kCaptureShare) != 0, evicting) << where;
    // Only the kvzip cell has an extra pass.
    const bool has_pass = cell.method == &methods.kvzip;
    EXPECT_EQ(std::isnan(row.extra_pass_seconds), !has_pass) << where;
    EXPECT_EQ((row.shared_costs & kExtraPassShare) != 0, has_pass) << where;
    EXPECT_GT(row.evict_seconds, 0.0) << where << ": its fork (or the cell's eviction share)";
    EXPECT_GT(row.peak_kv_bytes, row.kept_bytes) << where;
    EXPECT_EQ(row.final_kv_bytes, row.peak_kv_bytes) << where;
    prefill += row.prefill_seconds;
    if (!std::isnan(row.capture_seconds)) capture += row.capture_seconds;
    if (!std::isnan(row.extra_pass_seconds)) pass += row.extra_pass_seconds;
    select += row.select_seconds;
    feed += row.feed_seconds;
    decode_sum += row.decode_seconds;
  }
  // The shares add up to what the unit measured.
  const UnitTimings& t = result.timings;
  EXPECT_NEAR(prefill, t.prefill_seconds, 1e-9 * (1 + t.prefill_seconds));
  EXPECT_NEAR(capture, t.capture_seconds, 1e-9 * (1 + t.capture_seconds));
  EXPECT_NEAR(pass, t.extra_pass_seconds, 1e-9 * (1 + t.extra_pass_seconds));
  EXPECT_NEAR(select, t.select_seconds, 1e-9 * (1 + t.select_seconds));
  EXPECT_NEAR(feed, t.feed_seconds, 1e-9 * (1 + t.feed_seconds));
  EXPECT_NEAR(decode_sum, t.decode_seconds, 1e-9 * (1 + t.decode_seconds));
  EXPECT_GT(t.prefill_seconds, 0.0);

  // One question: nothing is shared between a cell's rows, so no select / evict share bits.
  UnitTokens one = tokens;
  one.reuse_questions.resize(1);
  const UnitResult single = run_unit(model, weights, one, cells, decode(4));
  ASSERT_EQ(single.cells.size(), cells.size());
  for (const CellResult& row : single.cells) {
    EXPECT_EQ(row.shared_costs & (kSelectShare | kEvictShare), 0u) << "cell " << row.cell;
    EXPECT_EQ(row.n_questions, 1);
  }
}

TEST(ReuseFanOut, AFailingCellFailsAllItsRows) {
  const auto good = testing::make_top_k_method(testing::TestScore::key_norm);
  const auto throwing = testing::make_throwing_method();
  const auto out_of_range = testing::make_out_of_range_method();
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const UnitTokens tokens = tiny_reuse_unit(model.config().vocab_size, 11);
  const std::vector<CellSpec> cells = {
      {throwing.get(), {.compression = 0.5}, Protocol::reuse, 1},
      {good.get(), {.compression = 0.5}, Protocol::reuse, 2},
      {out_of_range.get(), {.compression = 0.5}, Protocol::reuse, 3},
      {nullptr, {}, Protocol::reuse, 4}};
  int compared = 0;
  const UnitResult result = expect_reuse_equals_naive_and_single(model, weights, tokens, cells,
                                                                 decode(5), "failures", compared);
  ASSERT_EQ(result.cells.size(), 16u);
  for (std::size_t r = 0; r < 16; ++r) {
    const CellResult& row = result.cells[r];
    const std::size_t i = r / 4;
    if (i == 0 || i == 2) {
      EXPECT_EQ(row.status, CellStatus::failed) << "row " << r;
      EXPECT_TRUE(row.generated.empty()) << "row " << r;
      EXPECT_NE(row.error.find(i == 0 ? "always refuses" : "invalid selection"), std::string::npos)
          << row.error;
    } else {
      EXPECT_EQ(row.status, CellStatus::ok) << "row " << r << ": " << row.error;
      EXPECT_EQ(row.generated.size(), 5u);
    }
  }
}

TEST(ReuseFanOut, RejectsMalformedReuseUnits) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::eager);
  const int vocab = model.config().vocab_size;
  const auto knorm = testing::make_top_k_method(testing::TestScore::key_norm);
  const UnitTokens good = tiny_reuse_unit(vocab, 12);
  const std::vector<CellSpec> reuse = {{knorm.get(), {.compression = 0.5}, Protocol::reuse, 1},
                                       {nullptr, {}, Protocol::reuse, 2}};
  const auto expect_error = [&](const UnitTokens& tokens, const std::vector<CellSpec>& cells,
                                const std::string& needle) {
    for (bool naive : {false, true}) {
      try {
        if (naive) {
          (void)run_unit_naive(model, weights, tokens, cells, decode(2));
        } else {
          (void)run_unit(model, weights, tokens, cells, decode(2));
        }
        ADD_FAILURE() << "accepted a unit that should fail with '" << needle << "'";
      } catch (const std::invalid_argument& error) {
        EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
      }
    }
  };
  // Reuse cells mixed with a query-agnostic one, naming the first other cell and its protocol.
  std::vector<CellSpec> mixed = reuse;
  mixed.push_back({nullptr, {}, Protocol::query_agnostic, 3});
  expect_error(good, mixed,
               "mixes 2 reuse cells with 1 cells of other protocols (cell 2 is query-agnostic)");
  // Reuse cells without questions; questions without reuse cells.
  UnitTokens no_questions = good;
  no_questions.reuse_questions.clear();
  no_questions.question = random_tokens(4, vocab, 1);
  no_questions.suffix = random_tokens(2, vocab, 2);
  expect_error(no_questions, reuse, "no reuse questions");
  UnitTokens plain = good;
  plain.question = random_tokens(4, vocab, 1);
  plain.suffix = random_tokens(2, vocab, 2);
  expect_error(plain, as_query_agnostic(reuse), "4 reuse questions but none of its cells");
  // A question without suffix; ids outside the vocabulary in a question or a suffix.
  UnitTokens no_suffix = good;
  no_suffix.reuse_questions[2].suffix.clear();
  expect_error(no_suffix, reuse, "reuse question 2 has no suffix tokens");
  UnitTokens bad_question = good;
  bad_question.reuse_questions[1].question[3] = vocab;
  expect_error(bad_question, reuse, "reuse question 1 question token 3 has id 300");
  UnitTokens bad_suffix = good;
  bad_suffix.reuse_questions[3].suffix[0] = -1;
  expect_error(bad_suffix, reuse, "reuse question 3 suffix token 0 has id -1");
  // The single question/suffix fields are unused under reuse: an empty suffix there is fine.
  UnitTokens unused = good;
  unused.suffix.clear();
  EXPECT_NO_THROW((void)run_unit(model, weights, unused, reuse, decode(2)));
}

// SmolLM2 (GGUF Q4_1, chatml, kvpress's split): one record-lookup document and three questions
// about different records, each with its own answer prefix.
TEST(ReuseFanOutSmolLM2, EqualsNaiveAndTheSingleQuestionUnits) {
  const std::filesystem::path gguf(KVAUDIT_DEFAULT_GGUF);
  if (!std::filesystem::exists(gguf)) {
    GTEST_SKIP() << "the default model " << gguf
                 << " is absent (tools/setup.sh fetches it); nothing to compare on SmolLM2";
  }
  const model::ModelWeights weights = model::load_model_weights(gguf);
  const std::unique_ptr<model::Tokenizer> tokenizer = model::load_tokenizer(gguf);
  CpuModel model(weights, AttentionBackend::eager);
  const model::EncodeOptions plain{.add_special_tokens = false, .parse_special = true};
  std::string context;
  const char* const cities[] = {"Lisbon", "Oslo", "Quito", "Hanoi", "Perth", "Tunis"};
  for (int i = 0; i < 6; ++i) {
    context += "Record " + std::to_string(i + 1) + ": the courier from " + cities[i] +
               " delivered " + std::to_string(11 + i * 17) + " parcels. ";
  }
  const std::vector<std::pair<std::string, std::string>> asked = {
      {"How many parcels did record 2 deliver?", "Answer:"},
      {"Which city was the courier of record 5 from? Reply with the city only.", "City:"},
      {"Sum the parcels of records 1 and 6.", "The sum is"}};
  UnitTokens tokens;
  for (const auto& [question, answer_prefix] : asked) {
    model::PromptSplitInput input;
    input.kind = model::ChatTemplateKind::chatml;
    input.context = context;
    input.question = question;
    input.answer_prefix = answer_prefix;
    const model::PromptParts parts = model::split_prompt(input);
    const std::vector<std::int32_t> ctx = tokenizer->encode(parts.prefix_plus_context, plain);
    if (tokens.context.empty()) tokens.context = ctx;
    ASSERT_EQ(ctx, tokens.context) << "the split context depends on the question";
    tokens.reuse_questions.push_back({tokenizer->encode(parts.question, plain),
                                      tokenizer->encode(parts.suffix_plus_answer_prefix, plain)});
  }
  ASSERT_GT(tokens.context.size(), 64u);  // longer than SnapKV's window
  const methods::ScorerMethod snapkv(
      std::make_shared<methods::SnapKvScorer>(methods::SnapKvParams{}));
  const methods::ThinkMethod think(
      methods::ThinkParams{.key_channel_compression_ratio = 0.5, .window_size = 32});
  std::uint64_t key = 1;
  const std::vector<CellSpec> cells = {{nullptr, {}, Protocol::reuse, key++},
                                       {&snapkv, {.compression = 0.5}, Protocol::reuse, key++},
                                       {&snapkv, {.compression = 0.9}, Protocol::reuse, key++},
                                       {&think, {.compression = 0.25}, Protocol::reuse, key++}};
  UnitRunOptions options;
  options.decode.max_new_tokens = 8;
  for (int eos : weights.config.eos_token_ids) options.decode.stop_token_ids.push_back(eos);
  options.seed = 2024;
  int compared = 0;
  const UnitResult result = expect_reuse_equals_naive_and_single(model, weights, tokens, cells,
                                                                 options, "SmolLM2", compared);
  EXPECT_EQ(compared, 12);
  for (const CellResult& row : result.cells) {
    EXPECT_EQ(row.status, CellStatus::ok) << row.error;
    EXPECT_FALSE(row.generated.empty());
  }
  std::printf(
      "SmolLM2: Lc=%d, 3 questions, %zu cells, %d rows equal on three routes; fan-out %.2f s\n",
      result.context_end, cells.size(), compared, result.timings.total_seconds);
}

}  // namespace
}  // namespace kvaudit::unit

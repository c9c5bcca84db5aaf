// DMS with decoding in the unit runner (methods/dms.h decoding = true,
// runners/unit/dms_decoding.h): a cell whose method is such a dms is fed the rest through
// DmsDecoding::feed and decodes with its DmsDecoding. On the tiny models with the CPU engine,
// dms(knorm, w = 8, decoding) under both protocols beside a full-KV cell, a prefill-only dms cell
// and a DecodingPress(KNorm) cell:
//   (a) the fan-out equals the naive route (ids, kept sets, bytes, compressions);
//   (b) it equals the steps done by hand (prefill of b tokens with a capture, dms's selection,
//       retain, DmsDecoding::feed of the rest, generate_greedy_compressing with the DmsDecoding:
//       the reference tests/methods/kvpress_decoding_dms_parity_test.cpp ties to kvpress);
//   (c) batches of 1, 2 and all cells give each cell the same result; reuse rows equal naive;
//   (d) the rule holds on the final cache: every head keeps the positions of its last w entries,
//       and every position a head lost scored below T (KNorm: −‖k‖ from the prefill's keys);
//   (e) an engine without observed feeds fails only the DMS-decoding cells, with its message;
//       a cell with both a decoding setting and dms decoding is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/dms.h"
#include "methods/knorm.h"
#include "methods/scorer_method.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/decoding_compression.h"
#include "runners/unit/dms_decoding.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/core_only_engine.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using cpu::CpuModel;
using testing::decoding_test_options;
using testing::expect_same_decode;
using testing::load_tiny_model;
using testing::random_tokens;
using testing::tiny_unit_tokens;

constexpr int kNewTokens = 20;
constexpr int kWindow = 8;
constexpr double kThreshold = -5.0;  // inside KNorm's −‖k‖ range on the tiny models

struct DmsMethods {
  std::shared_ptr<methods::KnormScorer> knorm_scorer = std::make_shared<methods::KnormScorer>();
  methods::DmsMethod dms_decoding{knorm_scorer, kWindow, /*decoding=*/true};
  methods::DmsMethod dms_prefill{knorm_scorer, kWindow, /*decoding=*/false};
  methods::ScorerMethod knorm{knorm_scorer};
  DecodingCell knorm_decoding{&knorm, {.compression_interval = 4, .target_size = 24}};

  std::vector<CellSpec> cells(Protocol agnostic = Protocol::query_agnostic) const {
    std::vector<CellSpec> c = {
        {nullptr, {}, agnostic, 1, nullptr},
        {&dms_decoding, {.threshold = kThreshold}, agnostic, 2, nullptr},
        {&dms_prefill, {.threshold = kThreshold}, agnostic, 3, nullptr},
        {nullptr, {}, agnostic, 4, &knorm_decoding},
    };
    if (agnostic == Protocol::query_agnostic)
      c.push_back({&dms_decoding, {.threshold = kThreshold}, Protocol::query_aware, 5, nullptr});
    return c;
  }
};

bool is_dms_decoding(const CellSpec& spec) {
  const auto* dms = dynamic_cast<const methods::DmsMethod*>(spec.method);
  return dms != nullptr && dms->decoding();
}

// (b) and (d): the cell's steps by hand; returns the output and checks the rule on the cache.
CompressingOutput by_hand(CpuModel& model, const model::ModelWeights& weights, const CellSpec& spec,
                          const CellResult& cell, std::span<const std::int32_t> prompt,
                          std::span<const std::int32_t> rest, const UnitRunOptions& options,
                          const std::string& where) {
  const auto& dms = dynamic_cast<const methods::DmsMethod&>(*spec.method);
  const int b = cell.boundary;
  std::unique_ptr<SequenceCache> cache = model.new_cache(0);
  auto capture = model.new_capture({.boundaries = {b}});
  model.prefill(*cache, prompt.first(static_cast<std::size_t>(b)), LogitRows::none, capture.get());
  const methods::SelectionContext context{.seed = options.seed, .cell_key = spec.cell_key};
  methods::Selection selection;
  {
    const auto views = capture->layers(b, *cache, weights, model.rope_inv_freq());
    selection = dms.select(views, spec.budget, context);
  }
  EXPECT_TRUE(selection.kept == cell.selection->kept) << where << ": prefill kept sets";
  cache->retain(selection);
  DmsDecoding state(model.config(), dms, spec.budget.threshold, selection, b, context);
  std::optional<CompressionEvent> fed;
  const LogitMatrix last = state.feed(model, *cache, rest, fed);
  const CompressingSequence sequence{.cache = cache.get(),
                                     .last_logits = last.row(0),
                                     .method = spec.method,
                                     .policy = {},
                                     .context = context,
                                     .dms = &state};
  CompressingOutput out =
      generate_greedy_compressing(model, {&sequence, 1},
                                  {.max_new_tokens = options.decode.max_new_tokens,
                                   .eos_token_ids = options.decode.stop_token_ids})
          .front();
  // (d) The rule on the final cache: every head holds the last w positions, and every position it
  // still holds outside them was judged and kept, so its KNorm score (−‖k‖ of the key as stored,
  // which is what was scored) is not below T.
  const std::int64_t total = cache->original_length();
  for (int layer = 0; layer < cache->num_layers(); ++layer) {
    for (int h = 0; h < cache->num_kv_heads(); ++h) {
      const CacheHeadEntries e = cache->head_entries(layer, h);
      std::vector<std::int32_t> tail;
      for (std::int64_t p = std::max<std::int64_t>(0, total - kWindow); p < total; ++p)
        tail.push_back(static_cast<std::int32_t>(p));
      EXPECT_TRUE(std::includes(e.positions.begin(), e.positions.end(), tail.begin(), tail.end()))
          << where << ": layer " << layer << " head " << h << " lost a window position";
      // Every held position's KNorm is ≥ T unless it is still in the window.
      const std::size_t d = static_cast<std::size_t>(model.config().head_dim);
      for (std::size_t i = 0; i < e.positions.size(); ++i) {
        if (e.positions[i] >= total - kWindow) continue;
        double norm = 0.0;
        for (std::size_t k = 0; k < d; ++k) norm += double(e.keys[i * d + k]) * e.keys[i * d + k];
        EXPECT_FALSE(-static_cast<float>(std::sqrt(norm)) < static_cast<float>(kThreshold))
            << where << ": layer " << layer << " head " << h << " kept position " << e.positions[i]
            << " scoring below T outside the window";
      }
    }
  }
  return out;
}

TEST(DmsDecodingFanOut, EqualsNaiveTheStepsByHandAndTheRule) {
  const DmsMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  int checked = 0;
  for (const auto& [family, dtype] : std::vector<std::pair<std::string, std::string>>{
           {"llama", "f32"}, {"llama", "bf16"}, {"qwen2", "f32"}}) {
    const model::ModelWeights weights = load_tiny_model(family, dtype);
    CpuModel model(weights, AttentionBackend::sdpa);
    const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
    const UnitRunOptions options = decoding_test_options(kNewTokens);
    const UnitResult fan_out = run_unit(model, weights, tokens, cells, options);
    const UnitResult naive = run_unit_naive(model, weights, tokens, cells, options);
    ASSERT_EQ(fan_out.cells.size(), cells.size());
    std::vector<std::int32_t> prompt = tokens.context;
    prompt.insert(prompt.end(), tokens.question.begin(), tokens.question.end());
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string where = family + " " + dtype + ": cell " + std::to_string(i);
      const CellResult& cell = fan_out.cells[i];
      ASSERT_EQ(cell.status, CellStatus::ok) << where << ": " << cell.error;
      expect_same_decode(cell, naive.cells[i], where + " (vs naive)");
      if (!is_dms_decoding(cells[i])) continue;
      std::vector<std::int32_t> rest(prompt.begin() + cell.boundary, prompt.end());
      rest.insert(rest.end(), tokens.suffix.begin(), tokens.suffix.end());
      const CompressingOutput direct =
          by_hand(model, weights, cells[i], cell, prompt, rest, options, where);
      EXPECT_EQ(cell.generated, direct.greedy.tokens) << where << ": ids differ from by hand";
      EXPECT_EQ(cell.peak_kv_bytes, static_cast<std::int64_t>(direct.peak_kept_bytes)) << where;
      EXPECT_EQ(cell.final_kv_bytes, static_cast<std::int64_t>(direct.final_kept_bytes)) << where;
      EXPECT_EQ(cell.decode_compressions, direct.compressions) << where;
      // It evicts while decoding: some steps did, and the cache ends below the prefill-only
      // dms cell's (same prefill eviction, nothing evicted after).
      EXPECT_GT(cell.decode_compressions, 0) << where;
      EXPECT_LE(cell.decode_compressions, kNewTokens - 1) << where;
      EXPECT_TRUE(std::isfinite(cell.compression_seconds) && cell.compression_seconds >= 0.0)
          << where;
      EXPECT_TRUE(std::isfinite(cell.feed_seconds)) << where;
      if (cells[i].protocol == Protocol::query_agnostic) {
        EXPECT_EQ(cell.kept_bytes, fan_out.cells[2].kept_bytes) << where;
        EXPECT_LT(cell.final_kv_bytes, fan_out.cells[2].final_kv_bytes) << where;
      }
      ++checked;
    }
    // The prefill-only dms cell never compresses while decoding.
    EXPECT_EQ(fan_out.cells[2].decode_compressions, 0);
    EXPECT_TRUE(std::isnan(fan_out.cells[2].compression_seconds));
  }
  EXPECT_EQ(checked, 6);
}

TEST(DmsDecodingFanOut, BatchesAndReuseRowsGiveEachCellItsResult) {
  const DmsMethods methods;
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  CpuModel model(weights, AttentionBackend::eager);
  {
    const std::vector<CellSpec> cells = methods.cells();
    const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 23);
    const UnitResult alone =
        run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens, 1));
    for (const int batch : {2, 0}) {
      const UnitResult batched =
          run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens, batch));
      for (std::size_t i = 0; i < cells.size(); ++i)
        expect_same_decode(batched.cells[i], alone.cells[i],
                           "batch " + std::to_string(batch) + " cell " + std::to_string(i));
    }
  }
  const std::vector<CellSpec> cells = methods.cells(Protocol::reuse);
  UnitTokens tokens;
  tokens.context = random_tokens(48, model.config().vocab_size, 5);
  for (int j = 0; j < 3; ++j)
    tokens.reuse_questions.push_back({random_tokens(4 + 3 * j, model.config().vocab_size, 50 + j),
                                      random_tokens(3, model.config().vocab_size, 60 + j)});
  const UnitResult fan_out =
      run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens));
  const UnitResult naive =
      run_unit_naive(model, weights, tokens, cells, decoding_test_options(kNewTokens));
  ASSERT_EQ(fan_out.cells.size(), naive.cells.size());
  for (std::size_t r = 0; r < fan_out.cells.size(); ++r) {
    const std::string where = "reuse row " + std::to_string(r);
    ASSERT_EQ(fan_out.cells[r].status, CellStatus::ok) << where << ": " << fan_out.cells[r].error;
    expect_same_decode(fan_out.cells[r], naive.cells[r], where);
  }
}

TEST(DmsDecodingFanOut, AnEngineWithoutObservedFeedsFailsOnlyTheDmsDecodingCells) {
  const DmsMethods methods;
  const std::vector<CellSpec> cells = methods.cells();
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel inner(weights, AttentionBackend::sdpa);
  testing::CoreOnlyEngine engine(inner);
  const UnitTokens tokens = tiny_unit_tokens(inner.config().vocab_size, 11);
  const UnitResult on_cpu =
      run_unit(inner, weights, tokens, cells, decoding_test_options(kNewTokens));
  for (auto* route : {&run_unit, &run_unit_naive}) {
    const UnitResult result =
        (*route)(engine, weights, tokens, cells, decoding_test_options(kNewTokens));
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const std::string where = "cell " + std::to_string(i);
      if (is_dms_decoding(cells[i])) {
        EXPECT_EQ(result.cells[i].status, CellStatus::failed) << where;
        EXPECT_NE(result.cells[i].error.find("dms decoding failed: the cuda engine cannot observe"),
                  std::string::npos)
            << result.cells[i].error;
        EXPECT_TRUE(result.cells[i].generated.empty()) << where;
      } else if (cells[i].decoding == nullptr) {
        expect_same_decode(result.cells[i], on_cpu.cells[i], where);
      }
    }
  }
}

TEST(DmsDecodingFanOut, RefusesADecodingSettingOnADmsDecodingCell) {
  const DmsMethods methods;
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  CpuModel model(weights, AttentionBackend::sdpa);
  const UnitTokens tokens = tiny_unit_tokens(model.config().vocab_size, 11);
  const std::vector<CellSpec> cells = {{&methods.dms_decoding,
                                        {.threshold = kThreshold},
                                        Protocol::query_agnostic,
                                        1,
                                        &methods.knorm_decoding}};
  try {
    run_unit(model, weights, tokens, cells, decoding_test_options(kNewTokens));
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("evicts while decoding by itself"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace kvaudit::unit

// The capture side of SqueezeAttention: CpuPrefillCapture's LayerCapture::attention_cosine (the
// cosine of the residual stream before and after each layer's self-attention block) against
// transformers on the tiny golden models (tests/golden/layer_budgets/hf_attention_cosine.json, made
// by tools/golden/make_layer_budget_golden.py --hf-only: eager attention, forward hooks on every
// decoder layer's input and its self_attn output, the residual add in the model dtype, the cosine
// in float64). Also: a boundary b < T sees the first b cosines of the long prefill, a capture
// that was not asked for the cosines hands out none, and the unit runner's fan-out asks for them
// when a cell's method needs them (CAKE and SqueezeAttention cells run, keep exactly N·Hkv·n_kept
// entries and equal the naive route's kept sets).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "methods/cake.h"
#include "methods/squeezeattention.h"
#include "methods/streaming_llm.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cpu/cpu_prefill_capture.h"
#include "runners/model/formats/load_weights.h"
#include "runners/unit/unit_runner.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit {
namespace {

namespace fs = std::filesystem;

const fs::path kSource(KVAUDIT_SOURCE_DIR);

TEST(AttentionCosineCapture, MatchesTransformersOnTheTinyModels) {
  std::ifstream in(kSource / "tests/golden/layer_budgets/hf_attention_cosine.json");
  ASSERT_TRUE(in) << "hf_attention_cosine.json is missing";
  const auto golden = nlohmann::json::parse(in);
  ASSERT_EQ(golden.at("cases").size(), 4u);
  for (const auto& c : golden.at("cases")) {
    const std::string name =
        c.at("model").get<std::string>() + "/" + c.at("dtype").get<std::string>();
    SCOPED_TRACE(name);
    const auto weights = model::load_model_weights(kSource / "tests/golden/tiny_models" / name);
    cpu::CpuModel model(weights, AttentionBackend::eager);
    const auto ids = c.at("ids").get<std::vector<std::int32_t>>();
    const int T = static_cast<int>(ids.size());
    const int b = T / 2;
    cpu::CpuPrefillCapture capture(weights.config,
                                   {.boundaries = {b, T}, .attention_cosine = true});
    auto state = model.new_sequence();
    model.prefill(state, ids, LogitRows::none, &capture);
    const auto full = capture.layers(T, state, weights, model.rope_inv_freq());
    const auto prefix = capture.layers(b, state, weights, model.rope_inv_freq());
    // The same forward (bf16: HF's rounding points emulated), so only the f32 storage of the cosine
    // and summation order differ (observed ≤ 2e-7).
    const double tolerance = 1e-6;
    const auto& expected_layers = c.at("attention_cosine");
    ASSERT_EQ(full.size(), expected_layers.size());
    for (std::size_t l = 0; l < full.size(); ++l) {
      const auto expected = expected_layers[l].get<std::vector<double>>();
      ASSERT_EQ(full[l].attention_cosine.size(), expected.size()) << "layer " << l;
      double worst = 0.0;
      for (std::size_t i = 0; i < expected.size(); ++i)
        worst = std::max(worst,
                         std::abs(static_cast<double>(full[l].attention_cosine[i]) - expected[i]));
      std::printf("[attention_cosine] %s layer %zu: max |ours - transformers| = %.3g\n",
                  name.c_str(), l, worst);
      EXPECT_LE(worst, tolerance) << "layer " << l;
      ASSERT_EQ(prefix[l].attention_cosine.size(), static_cast<std::size_t>(b));
      for (int i = 0; i < b; ++i)
        EXPECT_EQ(prefix[l].attention_cosine[static_cast<std::size_t>(i)],
                  full[l].attention_cosine[static_cast<std::size_t>(i)]);
    }
  }
}

TEST(AttentionCosineCapture, NotCapturedUnlessAsked) {
  const auto weights = model::load_model_weights(kSource / "tests/golden/tiny_models/llama/f32");
  cpu::CpuModel model(weights, AttentionBackend::eager);
  const std::vector<std::int32_t> ids = {1, 5, 9, 13, 17, 21, 25, 29};
  cpu::CpuPrefillCapture capture(weights.config, {.boundaries = {8}});
  EXPECT_FALSE(capture.wants_attention_residual());
  auto state = model.new_sequence();
  model.prefill(state, ids, LogitRows::none, &capture);
  for (const auto& layer : capture.layers(8, state, weights, model.rope_inv_freq()))
    EXPECT_TRUE(layer.attention_cosine.empty());
}

std::vector<std::int32_t> ids_from(int count, int vocab, int seed) {
  std::vector<std::int32_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back((seed * 131 + i * 37) % vocab);
  return ids;
}

TEST(AttentionCosineCapture, FanOutServesCakeAndSqueezeAttentionCells) {
  const auto weights = model::load_model_weights(kSource / "tests/golden/tiny_models/qwen2/bf16");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const int vocab = model.config().vocab_size;
  unit::UnitTokens tokens;
  tokens.context = ids_from(60, vocab, 3);
  tokens.question = ids_from(12, vocab, 5);
  tokens.suffix = ids_from(4, vocab, 7);
  const methods::CakeMethod cake(methods::CakeParams{.window = 8});
  const methods::SqueezeAttentionMethod squeeze(std::make_shared<methods::StreamingLlmScorer>(4),
                                                0.5);
  std::vector<unit::CellSpec> cells;
  std::uint64_t key = 1;
  for (const methods::Method* m :
       {static_cast<const methods::Method*>(&cake), static_cast<const methods::Method*>(&squeeze)})
    for (const Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware})
      for (const double cr : {0.25, 0.75})
        cells.push_back({m, {.compression = cr}, protocol, key++});
  unit::UnitRunOptions options;
  options.decode.max_new_tokens = 3;
  options.keep_selections = true;
  const auto fan_out = unit::run_unit(model, weights, tokens, cells, options);
  const auto naive = unit::run_unit_naive(model, weights, tokens, cells, options);
  const auto& config = model.config();
  for (std::size_t i = 0; i < cells.size(); ++i) {
    SCOPED_TRACE(cells[i].method->name() + " cell " + std::to_string(i));
    const auto& cell = fan_out.cells[i];
    ASSERT_EQ(cell.status, unit::CellStatus::ok) << cell.error;
    ASSERT_EQ(naive.cells[i].status, unit::CellStatus::ok) << naive.cells[i].error;
    const std::int64_t n_kept = methods::kept_count(cell.boundary, cells[i].budget.compression);
    EXPECT_EQ(cell.kept_entries,
              static_cast<std::int64_t>(config.num_layers) * config.num_kv_heads * n_kept);
    ASSERT_TRUE(cell.selection && naive.cells[i].selection);
    EXPECT_EQ(cell.selection->kept, naive.cells[i].selection->kept);
    EXPECT_EQ(cell.generated, naive.cells[i].generated);
  }
}

}  // namespace
}  // namespace kvaudit

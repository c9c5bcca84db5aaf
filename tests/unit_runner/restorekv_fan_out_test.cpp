// RestoreKV cells in the unit runner (methods/restorekv.h; evict_cell appends the restore rows
// through InferenceEngine::append_restore_rows before retain): on the tiny Llama with the
// synthetic artefacts of tests/golden/artefacts/restorekv_tiny_llama,
//   - the fan-out equals the naive route (kept sets, kept entries, greedy outputs), both protocols,
//     both variants, beside kvzip cells that share the reconstruction pass;
//   - a cell's cache holds its context kept set plus the n restore rows in every head, and what
//     follows continues at b + n;
//   - budget matching: kept entries = context kept at r_eff = min(1, cr + n/b) + layers·Hkv·n;
//   - cr = 0 adds no rows (kvpress's no-op);
//   - an engine without the restore pass (CoreOnlyEngine, as the CUDA engine) fails exactly the
//     restorekv cells, with its message.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "methods/kvzip.h"
#include "methods/restorekv.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/core_only_engine.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_support.h"

#ifndef KVAUDIT_TINY_MODELS_DIR
#error "KVAUDIT_TINY_MODELS_DIR must be defined"
#endif

namespace kvaudit::unit {
namespace {

using testing::load_tiny_model;
using testing::tiny_unit_with_pass_prompt;

const std::filesystem::path kArtefacts =
    std::filesystem::path(KVAUDIT_TINY_MODELS_DIR).parent_path() / "artefacts" /
    "restorekv_tiny_llama";

methods::RestoreKvParams restorekv(methods::KvzipVariant variant, bool layerwise) {
  methods::RestoreKvParams p;
  p.variant = variant;
  p.layerwise = layerwise;
  p.restore_embeddings = (kArtefacts / "restore_embeddings.safetensors").string();
  p.adapter = kArtefacts.string();
  return p;
}

UnitRunOptions decode() {
  UnitRunOptions options;
  options.decode.max_new_tokens = 6;
  options.seed = 3;
  options.keep_selections = true;
  return options;
}

TEST(RestoreKvFanOut, FanOutEqualsNaiveAndTheCacheHoldsTheRestoreRows) {
  const methods::RestoreKvMethod plain(restorekv(methods::KvzipVariant::kvzip, false));
  const methods::RestoreKvMethod plus_layerwise(restorekv(methods::KvzipVariant::kvzip_plus, true));
  const methods::KvzipMethod kvzip(methods::KvzipParams{});
  const int n = plain.artefacts().tokens;
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (double cr : {0.0, 0.25, 0.75}) {
      cells.push_back({&plain, {.compression = cr}, protocol, key++});
      cells.push_back({&plus_layerwise, {.compression = cr}, protocol, key++});
      cells.push_back({&kvzip, {.compression = cr}, protocol, key++});
    }
  }
  for (const char* dtype : {"f32", "bf16"}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    cpu::CpuModel model(weights, AttentionBackend::sdpa);
    const UnitTokens tokens = tiny_unit_with_pass_prompt(model.config().vocab_size, 17);
    testing::expect_fan_out_equals_naive(model, weights, tokens, cells, decode(),
                                         std::string("llama ") + dtype);
    const UnitResult result = run_unit(model, weights, tokens, cells, decode());
    const std::int64_t layers = weights.config.num_layers, heads = weights.config.num_kv_heads;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const CellResult& r = result.cells[i];
      const std::string where = std::string(dtype) + " cell " + std::to_string(i);
      ASSERT_EQ(r.status, CellStatus::ok) << where << ": " << r.error;
      const auto* method = dynamic_cast<const methods::RestoreKvMethod*>(cells[i].method);
      if (method == nullptr) continue;
      std::int64_t context_kept = 0;
      for (const auto& layer : r.selection->kept)
        for (const auto& head : layer) {
          context_kept += static_cast<std::int64_t>(head.size());
          EXPECT_TRUE(head.empty() || head.back() < r.boundary) << where;
        }
      const double cr = cells[i].budget.compression;
      if (cr == 0.0) {  // kvpress's no-op: everything kept, no rows
        EXPECT_EQ(r.kept_entries, static_cast<std::int64_t>(r.boundary) * layers * heads) << where;
        EXPECT_EQ(r.selection->restore_rows, nullptr) << where;
        continue;
      }
      EXPECT_EQ(r.kept_entries, context_kept + layers * heads * n) << where;
      // The context kept is KVzip's at r_eff (global: int(N·r_eff) pruned in all).
      const double r_eff = methods::RestoreKvMethod::effective_compression(cr, n, r.boundary);
      const auto entries = static_cast<std::int64_t>(r.boundary) * layers * heads;
      if (method == &plain) {
        EXPECT_EQ(context_kept,
                  entries - static_cast<std::int64_t>(static_cast<double>(entries) * r_eff))
            << where;
      }
      // Budget-matched: about (1 − cr) of the candidates in all.
      EXPECT_NEAR(r.realised_retention, 1.0 - cr, 0.03) << where;
    }
  }
}

TEST(RestoreKvFanOut, AnEngineWithoutTheRestorePassFailsOnlyTheRestoreKvCells) {
  const methods::RestoreKvMethod plain(restorekv(methods::KvzipVariant::kvzip, false));
  const std::vector<CellSpec> cells = {{nullptr, {}, Protocol::query_agnostic, 1},
                                       {&plain, {.compression = 0.5}, Protocol::query_agnostic, 2}};
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel inner(weights, AttentionBackend::sdpa);
  testing::CoreOnlyEngine engine(inner);
  // The core-only engine has no extra pass either: the cell fails there first. With the pass
  // forwarded, the cell meets the restore pass's own refusal.
  testing::CoreOnlyEngine no_restore(inner, /*with_extra_pass=*/true);
  const UnitTokens tokens = tiny_unit_with_pass_prompt(inner.config().vocab_size, 17);
  const UnitResult on_cpu = run_unit(inner, weights, tokens, cells, decode());
  for (auto* route : {&run_unit, &run_unit_naive}) {
    const UnitResult result = (*route)(no_restore, weights, tokens, cells, decode());
    EXPECT_EQ(result.cells[0].status, CellStatus::ok);
    EXPECT_EQ(result.cells[0].generated, on_cpu.cells[0].generated);
    EXPECT_EQ(result.cells[1].status, CellStatus::failed);
    EXPECT_NE(result.cells[1].error.find("cannot run RestoreKV's LoRA restore pass"),
              std::string::npos)
        << result.cells[1].error;
  }
  const UnitResult core_only = run_unit(engine, weights, tokens, cells, decode());
  EXPECT_EQ(core_only.cells[1].status, CellStatus::failed);
}

TEST(RestoreKvFanOut, TheBudgetMatchedRatioIsKvpresss) {
  // min(1, cr + n / L) in double.
  EXPECT_DOUBLE_EQ(methods::RestoreKvMethod::effective_compression(0.25, 8, 128), 0.3125);
  EXPECT_DOUBLE_EQ(methods::RestoreKvMethod::effective_compression(0.9, 8, 128), 0.9625);
  EXPECT_DOUBLE_EQ(methods::RestoreKvMethod::effective_compression(0.9, 8, 80), 1.0);
  EXPECT_DOUBLE_EQ(methods::RestoreKvMethod::effective_compression(0.5, 8, 10), 1.0);
}

}  // namespace
}  // namespace kvaudit::unit

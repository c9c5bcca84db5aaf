// Methods with an extra forward pass (methods/extra_pass.h) in the unit runner: KVzip cells
// (both variants, global and layer-wise budgets, a chunked reconstruction, two compressions, both
// protocols, beside full-KV and other cells) give the same kept sets, digests and greedy outputs
// through the fan-out as through the naive route, on the tiny Llama (f32 eager, bf16 sdpa);
// cells that share a pass (same boundary and pass key) run it once, and its time is shared among
// them (CellResult::extra_pass_seconds, cell_costs_test.cpp); the pass leaves the prefilled cache
// alone (full-KV cells equal the naive ones);
// an engine without the pass (the CUDA engine) fails exactly the cells that need it, with its
// reason.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "methods/kvzip.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/core_only_engine.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_methods.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::expect_fan_out_equals_naive;
using testing::load_tiny_model;
using testing::tiny_unit_with_pass_prompt;

methods::KvzipParams kvzip(methods::KvzipVariant variant, bool layerwise, int chunk_size = 2048) {
  methods::KvzipParams p;
  p.variant = variant;
  p.layerwise = layerwise;
  p.chunk_size = chunk_size;
  return p;
}

UnitRunOptions decode(int max_new_tokens) {
  UnitRunOptions options;
  options.decode.max_new_tokens = max_new_tokens;
  options.seed = 3;
  return options;
}

TEST(KvzipFanOut, FanOutEqualsNaiveForKvzipCells) {
  std::vector<std::unique_ptr<methods::Method>> all;
  all.push_back(std::make_unique<methods::KvzipMethod>(kvzip(methods::KvzipVariant::kvzip, false)));
  all.push_back(std::make_unique<methods::KvzipMethod>(kvzip(methods::KvzipVariant::kvzip, true)));
  all.push_back(
      std::make_unique<methods::KvzipMethod>(kvzip(methods::KvzipVariant::kvzip_plus, false)));
  // Chunks of 16: the context (45 tokens after the head) takes three passes.
  all.push_back(
      std::make_unique<methods::KvzipMethod>(kvzip(methods::KvzipVariant::kvzip, false, 16)));
  all.push_back(testing::make_top_k_method(testing::TestScore::key_norm));
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (const auto& method : all)
      for (double cr : {0.25, 0.75})
        cells.push_back({method.get(), {.compression = cr}, protocol, key++});
  }
  // f32 with eager attention, bf16 with sdpa (the pass runs on either backend).
  for (const auto& [dtype, backend] : {std::pair{std::string("f32"), AttentionBackend::eager},
                                       std::pair{std::string("bf16"), AttentionBackend::sdpa}}) {
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    {
      cpu::CpuModel model(weights, backend);
      const UnitTokens tokens = tiny_unit_with_pass_prompt(model.config().vocab_size, 11);
      const std::string where = dtype + (backend == AttentionBackend::eager ? " eager" : " sdpa");
      const UnitResult result =
          expect_fan_out_equals_naive(model, weights, tokens, cells, decode(6), where);
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const CellResult& cell = result.cells[i];
        ASSERT_EQ(cell.status, CellStatus::ok) << where << " cell " << i << ": " << cell.error;
        if (cells[i].method != nullptr && cells[i].method->extra_pass() != nullptr) {
          EXPECT_GT(cell.select_seconds, 0.0) << where << " cell " << i;
          // kvzip evicts unevenly across heads but keeps N − int(N·cr) entries in all.
          const std::int64_t n = cell.candidate_entries;
          EXPECT_EQ(cell.kept_entries, n - static_cast<std::int64_t>(static_cast<double>(n) *
                                                                     cells[i].budget.compression))
              << where << " cell " << i;
        }
      }
    }
  }
}

// A pass that counts its chunks' runs (one observe per layer per chunk).
class CountingPassMethod final : public methods::Method, public methods::ExtraPass {
 public:
  explicit CountingPassMethod(std::string key) : key_(std::move(key)) {}
  methods::Selection select(std::span<const methods::LayerCapture> layers,
                            const methods::Budget& budget,
                            const methods::SelectionContext& context) const override {
    return inner_.select_from_scores(*context.extra_pass, budget.compression,
                                     layers.front().model_is_bf16);
  }
  const methods::ExtraPass* extra_pass() const override { return this; }
  std::string name() const override { return "counting(" + key_ + ")"; }
  std::string pass_key() const override { return key_; }
  std::vector<methods::PassChunk> chunks(std::span<const std::int32_t> cached,
                                         const methods::PassPrompt& prompt) const override {
    return inner_.chunks(cached, prompt);
  }
  void observe(const methods::LayerCapture& cached, const methods::PassChunk& chunk,
               const methods::PassLayerView& rows,
               methods::ExtraPassResult& result) const override {
    ++observed;
    inner_.observe(cached, chunk, rows, result);
  }
  mutable std::atomic<int> observed{0};

 private:
  std::string key_;
  methods::KvzipMethod inner_{methods::KvzipParams{}};
};

TEST(KvzipFanOut, CellsSharingAPassRunItOnce) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const UnitTokens tokens = tiny_unit_with_pass_prompt(model.config().vocab_size, 21);
  CountingPassMethod a("a"), a_again("a"), b("b");
  const std::vector<CellSpec> cells = {
      {&a, {.compression = 0.25}, Protocol::query_agnostic, 1},
      {&a, {.compression = 0.5}, Protocol::query_agnostic, 2},
      {&a_again, {.compression = 0.75}, Protocol::query_agnostic, 3},  // same key: shared
      {&a, {.compression = 0.5}, Protocol::query_aware, 4},            // other boundary
      {&b, {.compression = 0.5}, Protocol::query_agnostic, 5},         // other key
  };
  const UnitResult result = run_unit(model, weights, tokens, cells, decode(2));
  const int layers = model.config().num_layers;
  // a: one run at Lc and one at Lq (a_again shares the Lc run); b: one run.
  EXPECT_EQ(a.observed + a_again.observed, 2 * layers);
  EXPECT_EQ(b.observed, layers);
  for (const CellResult& cell : result.cells) EXPECT_EQ(cell.status, CellStatus::ok) << cell.error;
}

TEST(KvzipFanOut, AnEngineWithoutThePassFailsOnlyThoseCells) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  testing::CoreOnlyEngine engine(model);
  const UnitTokens tokens = tiny_unit_with_pass_prompt(model.config().vocab_size, 31);
  const methods::KvzipMethod kvzip_method(kvzip(methods::KvzipVariant::kvzip, false));
  const auto other = testing::make_top_k_method(testing::TestScore::key_norm);
  const std::vector<CellSpec> cells = {
      {&kvzip_method, {.compression = 0.5}, Protocol::query_agnostic, 1},
      {other.get(), {.compression = 0.5}, Protocol::query_agnostic, 2},
      {nullptr, {}, Protocol::query_agnostic, 3},
  };
  for (auto* route : {&run_unit, &run_unit_naive}) {
    const UnitResult result = (*route)(engine, weights, tokens, cells, decode(2));
    EXPECT_EQ(result.cells[0].status, CellStatus::failed);
    EXPECT_EQ(result.cells[0].error,
              "method kvzip failed: its extra forward pass failed: the cuda engine cannot run a "
              "method's extra forward pass (KVzip's context reconstruction); run such methods on "
              "the cpu device");
    EXPECT_EQ(result.cells[1].status, CellStatus::ok) << result.cells[1].error;
    EXPECT_EQ(result.cells[2].status, CellStatus::ok) << result.cells[2].error;
  }
}

TEST(KvzipFanOut, AUnitWithoutTheReconstructionIdsFailsTheKvzipCells) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  UnitTokens tokens = tiny_unit_with_pass_prompt(model.config().vocab_size, 41);
  tokens.pass_prompt = {};
  const methods::KvzipMethod kvzip_method(kvzip(methods::KvzipVariant::kvzip, false));
  const std::vector<CellSpec> cells = {
      {&kvzip_method, {.compression = 0.5}, Protocol::query_aware, 1},
      {nullptr, {}, Protocol::query_aware, 2},
  };
  const UnitResult result =
      expect_fan_out_equals_naive(model, weights, tokens, cells, decode(2), "no ids");
  EXPECT_EQ(result.cells[0].status, CellStatus::failed);
  EXPECT_NE(result.cells[0].error.find("no reconstruction prompt ids"), std::string::npos)
      << result.cells[0].error;
  EXPECT_EQ(result.cells[1].status, CellStatus::ok);
}

}  // namespace
}  // namespace kvaudit::unit

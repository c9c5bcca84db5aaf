// fastkvzip in the unit runner (methods/fastkvzip.h; runners/unit/unit_runner.cpp): a method that
// asks for the attention input (Method::needs_attention_input) gets it from the CPU capture in both
// routes. On the tiny Llama (f32 and bf16) with the golden gates (tests/golden/artefacts/
// fastkvzip_gates_<dtype>.safetensors, made by tools/golden/kvpress_groups/fastkvzip.py): every
// cell runs, the fan-out gives what the naive route gives, and the kept totals follow the budget
// (one top-k over all layers: N − int(N·cr) entries; layerwise: Hkv·L − int(Hkv·L·cr) per layer).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "methods/fastkvzip.h"
#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/fan_out_check.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::expect_fan_out_equals_naive;
using testing::load_tiny_model;
using testing::random_tokens;

std::unique_ptr<methods::Method> fastkvzip(const std::string& dtype, bool layerwise) {
  methods::FastKvzipParams params;
  params.gates = std::string(KVAUDIT_TINY_MODELS_DIR) + "/../artefacts/fastkvzip_gates_" + dtype +
                 ".safetensors";
  params.layerwise = layerwise;
  auto method = std::make_unique<methods::FastKvzipMethod>(params);
  method->set_parameters(params);
  return method;
}

TEST(FastKvzipFanOut, BothRoutesCaptureTheAttentionInputAndKeepTheBudget) {
  constexpr int kContext = 48, kQuestion = 10;
  for (const std::string dtype : {"f32", "bf16"}) {
    const auto global = fastkvzip(dtype, false);
    const auto layerwise = fastkvzip(dtype, true);
    std::vector<CellSpec> cells;
    std::uint64_t key = 1;
    for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
      cells.push_back({nullptr, {}, protocol, key++});
      for (const methods::Method* method : {global.get(), layerwise.get()})
        for (double cr : {0.25, 0.75})
          cells.push_back({method, {.compression = cr}, protocol, key++});
    }
    UnitRunOptions options;
    options.decode.max_new_tokens = 4;
    const model::ModelWeights weights = load_tiny_model("llama", dtype);
    cpu::CpuModel model(weights, AttentionBackend::sdpa);
    UnitTokens tokens;
    tokens.context = random_tokens(kContext, model.config().vocab_size, 41);
    tokens.question = random_tokens(kQuestion, model.config().vocab_size, 42);
    tokens.suffix = random_tokens(4, model.config().vocab_size, 43);
    const UnitResult result =
        expect_fan_out_equals_naive(model, weights, tokens, cells, options, dtype);
    const std::int64_t hkv = model.config().num_kv_heads;
    const std::int64_t layers = model.config().num_layers;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      ASSERT_EQ(result.cells[i].status, CellStatus::ok)
          << dtype << " cell " << i << ": " << result.cells[i].error;
      if (cells[i].method == nullptr) continue;
      const std::int64_t length =
          cells[i].protocol == Protocol::query_aware ? kContext + kQuestion : kContext;
      const double cr = cells[i].budget.compression;
      const auto& kept = result.cells[i].selection->kept;
      std::int64_t total = 0;
      for (const auto& layer : kept) {
        std::int64_t in_layer = 0;
        for (const auto& head : layer) in_layer += static_cast<std::int64_t>(head.size());
        if (cells[i].method == layerwise.get()) {
          const std::int64_t per_layer = hkv * length;
          EXPECT_EQ(in_layer,
                    per_layer - static_cast<std::int64_t>(static_cast<double>(per_layer) * cr))
              << dtype << " cell " << i;
        }
        total += in_layer;
      }
      const std::int64_t n = layers * hkv * length;
      if (cells[i].method == global.get()) {
        EXPECT_EQ(total, n - static_cast<std::int64_t>(static_cast<double>(n) * cr))
            << dtype << " cell " << i;
      }
    }
  }
}

}  // namespace
}  // namespace kvaudit::unit

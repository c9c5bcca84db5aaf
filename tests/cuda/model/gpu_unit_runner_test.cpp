// The one fan-out (unit::run_unit) on the CUDA engine against the same fan-out on the CPU engine,
// with the same bf16 weights: kept-set overlap per method (the CUDA capture's device fast path —
// GPU scorers + GPU top-k — where the method has one, CPU methods on GPU-captured data otherwise)
// and greedy answers, on SmolLM2 with a real chat prompt (and the tiny llama without a tokenizer).
//   overlap(method) = Σ_cells Σ_(layer, head) |kept_gpu ∩ kept_cpu| / Σ |kept_cpu|
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "runners/cuda/capture/gpu_scorers.h"
#include "runners/cuda/cuda_model.h"
#include "runners/model/chat/prompt_split.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/unit_runner.h"
#include "suite/records/content_digests.h"
#include "tests/cuda/gpu_test_support.h"
#include "tests/cuda/model/model_fixtures.h"

namespace kvaudit::cuda::test {
namespace {

using unit::CellSpec;

struct MethodUnderTest {
  std::string id;
  methods::MethodConfig config;
  std::unique_ptr<methods::Method> method;
  bool has_gpu_scorer = false;
};

std::vector<MethodUnderTest> methods_under_test() {
  static const methods::MethodConfig snap{
      .name = "snap", .id = "snapkv", .variant = "", .params = {}};
  const methods::ConfigResolver resolve = [&](const std::string& name) {
    return name == "snap" ? &snap : nullptr;
  };
  std::vector<MethodUnderTest> made;
  for (const char* id : {"knorm", "keydiff", "tova", "snapkv", "observed_attention",
                         "expected_attention", "streaming_llm", "pyramidkv", "adakv", "chunkkv",
                         "criticalkv", "h2o", "defensivekv", "random"}) {
    MethodUnderTest m;
    m.id = id;
    m.config = methods::MethodConfig{.name = id, .id = id, .variant = "", .params = {}};
    if (m.id == "adakv" || m.id == "chunkkv" || m.id == "criticalkv") {
      m.config.params["scorer"] = std::string("snap");
    }
    m.method = methods::make_method(m.config, resolve);
    m.has_gpu_scorer = gpu_scorer_for(m.method->parameters()).has_value();
    made.push_back(std::move(m));
  }
  return made;
}

struct Tally {
  std::int64_t common = 0, cpu_kept = 0;
  int cells = 0, identical_answers = 0;
};

void compare_unit(const model::ModelWeights& weights, AttentionBackend backend,
                  const unit::UnitTokens& tokens, std::map<std::string, Tally>& tally,
                  std::vector<MethodUnderTest>& methods) {
  cpu::CpuModel cpu_model(weights, backend, cpu_twin_options());
  CudaModel gpu_model(weights, backend);
  std::vector<CellSpec> cells;
  std::vector<std::string> names;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    names.push_back("full");
    for (auto& m : methods) {
      for (double cr : {0.5, 0.75}) {
        cells.push_back({m.method.get(), {.compression = cr}, protocol, key++});
        names.push_back(m.id);
      }
    }
  }
  unit::UnitRunOptions options;
  options.decode.max_new_tokens = 12;
  for (int eos : weights.config.eos_token_ids) options.decode.stop_token_ids.push_back(eos);
  options.seed = 2026;
  options.keep_selections = true;
  const unit::UnitResult on_cpu = unit::run_unit(cpu_model, weights, tokens, cells, options);
  const unit::UnitResult on_gpu = unit::run_unit(gpu_model, weights, tokens, cells, options);
  ASSERT_EQ(on_gpu.cells.size(), cells.size());
  std::printf(
      "[kept] unit Lc=%d Lq=%d: CPU %.2f s, GPU %.2f s (prefill %.3f, select %.3f, feed %.3f, "
      "decode %.3f)\n",
      on_cpu.context_end, on_cpu.question_end, on_cpu.timings.total_seconds,
      on_gpu.timings.total_seconds, on_gpu.timings.prefill_seconds, on_gpu.timings.select_seconds,
      on_gpu.timings.feed_seconds, on_gpu.timings.decode_seconds);
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& a = on_cpu.cells[i];
    const auto& b = on_gpu.cells[i];
    EXPECT_EQ(b.status, a.status) << names[i] << ": " << b.error << " / " << a.error;
    if (a.status != unit::CellStatus::ok || b.status != unit::CellStatus::ok) continue;
    Tally& t = tally[names[i]];
    ++t.cells;
    if (a.generated == b.generated) ++t.identical_answers;
    EXPECT_EQ(b.boundary, a.boundary);
    if (!a.selection || !b.selection) continue;
    for (std::size_t l = 0; l < a.selection->kept.size(); ++l) {
      for (std::size_t h = 0; h < a.selection->kept[l].size(); ++h) {
        const auto& x = a.selection->kept[l][h];
        const auto& y = b.selection->kept[l][h];
        std::vector<std::int32_t> both;
        std::set_intersection(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(both));
        t.common += static_cast<std::int64_t>(both.size());
        t.cpu_kept += static_cast<std::int64_t>(x.size());
      }
    }
  }
}

void report_and_check(const std::string& label, const std::map<std::string, Tally>& tally) {
  for (const auto& [name, t] : tally) {
    const double overlap = t.cpu_kept > 0 ? double(t.common) / double(t.cpu_kept) : 1.0;
    std::printf(
        "[kept] %s %-20s overlap %.4f (%lld of %lld kept entries), answers identical %d/%d\n",
        label.c_str(), name.c_str(), overlap, static_cast<long long>(t.common),
        static_cast<long long>(t.cpu_kept), t.identical_answers, t.cells);
    if (t.cpu_kept > 0) {
      EXPECT_GE(overlap, 0.99) << label << " " << name;
    }
  }
}

// The device fast path is chosen by the methods' typed parameters (no GPU needed): exactly the six
// per-head-top-k scorers with a GPU twin get one; keydiff's block variant, wrappers, pyramidkv,
// streaming_llm, random and the rest run their CPU code on the GPU-captured data.
TEST(CudaUnitRunner, GpuScorersAreChosenByTheMethodsTypedParameters) {
  const std::set<std::string> with_gpu_scorer = {
      "knorm", "keydiff", "tova", "snapkv", "observed_attention", "expected_attention"};
  for (const MethodUnderTest& m : methods_under_test()) {
    EXPECT_EQ(m.has_gpu_scorer, with_gpu_scorer.contains(m.id)) << m.id;
  }
  const methods::MethodConfig block{.name = "b", .id = "keydiff", .variant = "block", .params = {}};
  EXPECT_FALSE(gpu_scorer_for(methods::make_method(block)->parameters()).has_value());
  const methods::MethodConfig original{
      .name = "o", .id = "snapkv", .variant = "original", .params = {{"window", std::int64_t{8}}}};
  const auto spec = gpu_scorer_for(methods::make_method(original)->parameters());
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->kind, GpuScorerKind::snapkv);
  EXPECT_EQ(spec->snapkv.variant, methods::SnapKvVariant::original);
  EXPECT_EQ(spec->snapkv.window, 8);
  EXPECT_EQ(spec->snapkv.kernel_size, 7);  // the original variant's default
  EXPECT_EQ(spec->snapkv.pooling, methods::Pooling::max);
  // A method built outside the catalogue has no typed parameters and so no fast path.
  EXPECT_FALSE(gpu_scorer_for(methods::MethodParams{}).has_value());
}

TEST(CudaUnitRunner, KeptSetsAndAnswersMatchTheCpuRunnerOnSmolLM2) {
  KVAUDIT_REQUIRE_GPU();
  if (!std::filesystem::exists(smollm2_gguf())) {
    GTEST_SKIP() << "SmolLM2 GGUF not found at " << smollm2_gguf()
                 << " (KVAUDIT_SMOLLM2_GGUF overrides)";
  }
  const model::ModelWeights& weights = bf16_weights(smollm2_gguf());
  const std::unique_ptr<model::Tokenizer> tokenizer = model::load_tokenizer(smollm2_gguf());
  auto methods = methods_under_test();
  for (AttentionBackend backend : {AttentionBackend::sdpa, AttentionBackend::eager}) {
    std::map<std::string, Tally> tally;
    for (int variant = 0; variant < 1; ++variant) {  // one chat unit per backend (device time)
      std::string context;
      for (int i = 0; i < 24; ++i) {
        context += "Record " + std::to_string(i + 1) + ": the courier from city " +
                   std::to_string((i * 7 + variant) % 17) + " delivered " +
                   std::to_string(11 + (i * 37 + variant * 13) % 89) + " parcels to warehouse " +
                   static_cast<char>('A' + (i + variant) % 26) + ". ";
      }
      model::PromptSplitInput input;
      input.kind = model::ChatTemplateKind::chatml;
      input.context = context;
      input.question = "How many parcels did record " + std::to_string(12 + variant) + " deliver?";
      input.answer_prefix = "Answer:";
      const model::PromptParts parts = model::split_prompt(input);
      const model::EncodeOptions plain{.add_special_tokens = false, .parse_special = true};
      unit::UnitTokens tokens;
      tokens.context = tokenizer->encode(parts.prefix_plus_context, plain);
      tokens.question = tokenizer->encode(parts.question, plain);
      tokens.suffix = tokenizer->encode(parts.suffix_plus_answer_prefix, plain);
      compare_unit(weights, backend, tokens, tally, methods);
    }
    report_and_check(
        std::string("SmolLM2 ") + (backend == AttentionBackend::sdpa ? "sdpa" : "eager"), tally);
  }
}

TEST(CudaUnitRunner, KeptSetsMatchTheCpuRunnerOnTheTinyLlama) {
  KVAUDIT_REQUIRE_GPU();
  const model::ModelWeights& weights = bf16_weights(tiny_models_dir() / "llama" / "bf16");
  auto methods = methods_under_test();
  std::map<std::string, Tally> tally;
  unit::UnitTokens tokens;
  std::uint32_t state = 99;
  auto next = [&]() {
    state = state * 1664525u + 1013904223u;
    return static_cast<std::int32_t>((state >> 8) % 300u);
  };
  for (int i = 0; i < 180; ++i) tokens.context.push_back(next());
  for (int i = 0; i < 20; ++i) tokens.question.push_back(next());
  for (int i = 0; i < 4; ++i) tokens.suffix.push_back(next());
  compare_unit(weights, AttentionBackend::sdpa, tokens, tally, methods);
  report_and_check("tiny llama sdpa", tally);
}

// What the records of a unit's cells would hold below the score: per cell its status, boundary,
// kept_digest (suite/records/content_digests.h; the records' own recipe, full KV as every position
// of the boundary) and generated tokens.
struct CellOutcome {
  unit::CellStatus status;
  int boundary;
  std::uint64_t kept;
  std::vector<std::int32_t> generated;
  bool operator==(const CellOutcome&) const = default;
};

std::vector<CellOutcome> outcomes(const unit::UnitResult& result, const model::ModelConfig& c) {
  std::vector<CellOutcome> all;
  for (const auto& cell : result.cells) {
    const std::uint64_t kept =
        cell.selection ? records::kept_digest(cell.selection->kept)
                       : records::full_kept_digest(c.num_layers, c.num_kv_heads, cell.boundary);
    all.push_back({cell.status, cell.boundary, kept, cell.generated});
  }
  return all;
}

// Determinism: the same GPU and build give the same records run to run. One unit (every method of
// the list, both protocols, decoding with CUDA graphs) runs on two freshly built models and again
// on the first; every cell's kept-set digest (the records' recipe) and answer must be identical.
// The pinned cuBLASLt configurations are printed (gemm.h).
TEST(CudaUnitRunner, RunToRunIdenticalOnTheSameGpu) {
  KVAUDIT_REQUIRE_GPU();
  const bool smollm2 = std::filesystem::exists(smollm2_gguf());
  const model::ModelWeights& weights =
      smollm2 ? bf16_weights(smollm2_gguf()) : bf16_weights(tiny_models_dir() / "llama" / "bf16");
  auto methods = methods_under_test();
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (auto& m : methods)
      cells.push_back({m.method.get(), {.compression = 0.5}, protocol, key++});
  }
  unit::UnitTokens tokens;
  std::uint32_t state = 7;
  const auto next = [&]() {
    state = state * 1664525u + 1013904223u;
    return static_cast<std::int32_t>((state >> 8) % 300u);
  };
  for (int i = 0; i < (smollm2 ? 900 : 180); ++i) tokens.context.push_back(next());
  for (int i = 0; i < 24; ++i) tokens.question.push_back(next());
  for (int i = 0; i < 4; ++i) tokens.suffix.push_back(next());
  unit::UnitRunOptions options;
  options.decode.max_new_tokens = 16;
  options.seed = 2026;
  options.keep_selections = true;
  for (AttentionBackend backend : {AttentionBackend::sdpa, AttentionBackend::eager}) {
    CudaModel first(weights, backend);
    const unit::UnitResult a = unit::run_unit(first, weights, tokens, cells, options);
    const unit::UnitResult again = unit::run_unit(first, weights, tokens, cells, options);
    CudaModel second(weights, backend);
    const unit::UnitResult b = unit::run_unit(second, weights, tokens, cells, options);
    const auto oa = outcomes(a, weights.config), o_again = outcomes(again, weights.config),
               ob = outcomes(b, weights.config);
    std::printf("[determinism] %s %s, %zu cells: same model twice %s, second model %s\n",
                smollm2 ? "SmolLM2" : "tiny llama",
                backend == AttentionBackend::sdpa ? "sdpa" : "eager", cells.size(),
                oa == o_again ? "identical" : "DIFFERENT", oa == ob ? "identical" : "DIFFERENT");
    EXPECT_EQ(oa, o_again) << "the same model, run twice";
    EXPECT_EQ(oa, ob) << "two models on the same GPU";
    for (const std::string& plan : first.gemm_plans()) std::printf("[gemm] %s\n", plan.c_str());
  }
}

}  // namespace
}  // namespace kvaudit::cuda::test

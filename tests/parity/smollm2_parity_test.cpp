// HF parity of the GGUF loader + CPU backend on the embedded default model, SmolLM2-135M-Instruct
// (Q4_1 GGUF, dequantized to f32). The reference (tests/golden/smollm2, written by
// tools/golden/make_smollm2_golden.py) is transformers loading the same GGUF file
// (`from_pretrained(dir, gguf_file=…, dtype=float32)`), under eager and sdpa.
//
// Acceptance (kvaudit issue 3, item 7), per backend against HF's same backend:
//   top-1 agreement at ≥ 99% of all prompt positions (three plain and two chat-rendered prompts);
//   ‖Δ‖/‖ref‖ ≤ 1e-3 for the full logits stored at a few positions;
//   greedy continuations identical to HF generate(do_sample=False) for at least 32 tokens (of the
//   48 stored), decoded as one batch.
// Token ids come from the fixture, so this test does not depend on our tokenizer. The model file is
// not in git (tools/fetch_default_model.sh); without it the tests skip and say so. A file that is
// present but differs from the one the fixture was made from (size, SHA-256) fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "base/argmax.h"
#include "runners/unit/greedy_decoding.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/formats/mapped_file.h"
#include "suite/common/sha256.h"
#include "tests/parity/golden_reference.h"
#include "tests/parity/logit_comparison.h"

namespace kvaudit::parity_test {
namespace {


constexpr double kTopOneAgreementFraction = 0.99;
constexpr double kFullLogitRelativeNorm = 1e-3;
constexpr std::size_t kGreedyIdenticalTokens = 32;

const GoldenReference& reference() {
  static const GoldenReference golden{std::filesystem::path(KVAUDIT_SMOLLM2_GOLDEN_DIR)};
  return golden;
}

// KVAUDIT_SMOLLM2_GGUF overrides the default location (models/, filled by fetch_default_model.sh).
std::filesystem::path gguf_path() {
  if (const char* path = std::getenv("KVAUDIT_SMOLLM2_GGUF"); path != nullptr && *path != '\0') {
    return path;
  }
  return KVAUDIT_SMOLLM2_GGUF_DEFAULT;
}

void print(const std::string& line) { std::cout << "[parity] " << line << std::endl; }

std::string backend_name(AttentionBackend backend) {
  return backend == AttentionBackend::eager ? "eager" : "sdpa";
}

// Loaded once, after checking that the file is the one the fixture was generated from.
const model::ModelWeights& smollm2_weights() {
  static const std::unique_ptr<model::ModelWeights> weights = [] {
    const std::filesystem::path path = gguf_path();
    const auto expected_bytes = reference().manifest().at("model_file_bytes").get<std::uint64_t>();
    const auto expected_sha = reference().manifest().at("model_file_sha256").get<std::string>();
    {
      const model::MappedFile file(path);
      if (file.size() != expected_bytes) {
        throw std::runtime_error(path.string() + ": " + std::to_string(file.size()) +
                                 " bytes, but the fixture was made from a file of " +
                                 std::to_string(expected_bytes) + " bytes");
      }
      const auto bytes = file.bytes();
      const std::string sha =
          sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
      if (sha != expected_sha) {
        throw std::runtime_error(path.string() + ": SHA-256 " + sha +
                                 " differs from the fixture's model file (" + expected_sha + ")");
      }
    }
    return std::make_unique<model::ModelWeights>(model::load_model_weights(path));
  }();
  return *weights;
}

// The backend as a parameter; named so that gtest (and ctest) list it as "eager"/"sdpa".
struct BackendParam {
  AttentionBackend backend;
};
void PrintTo(const BackendParam& param, std::ostream* out) { *out << backend_name(param.backend); }

class Smollm2Parity : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(gguf_path())) {
      GTEST_SKIP() << "SmolLM2 GGUF not found at " << gguf_path()
                   << " (run tools/fetch_default_model.sh or set KVAUDIT_SMOLLM2_GGUF)";
    }
  }
  std::string label() const { return "SmolLM2 " + backend_name(backend()); }
  AttentionBackend backend() const { return GetParam().backend; }
  const nlohmann::json& backend_entry() const {
    return reference().manifest().at("backends").at(backend_name(backend()));
  }
};

TEST_P(Smollm2Parity, LogitsMatchHf) {
  const model::ModelWeights& weights = smollm2_weights();
  cpu::CpuModel cpu_model(weights, backend());
  const auto vocab = reference().manifest().at("vocab_size").get<std::int64_t>();
  ASSERT_EQ(weights.config.vocab_size, vocab);
  ASSERT_EQ(weights.config.dtype, model::ComputeDtype::f32);
  const nlohmann::json& prompts = reference().manifest().at("prompts");
  std::int64_t positions = 0;
  std::int64_t agreements = 0;
  DifferenceStats max_logit;  // our max logit vs HF's, every position
  DifferenceStats full;       // full logits at the stored positions
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<std::int32_t> ids = token_ids(prompts[p].at("token_ids"));
    const nlohmann::json& expected = backend_entry().at("prompts").at(p);
    const std::vector<std::int32_t> hf_argmax = token_ids(expected.at("argmax"));
    const auto hf_max = expected.at("max_logit").get<std::vector<float>>();
    const auto hf_second = expected.at("second_logit").get<std::vector<float>>();
    cpu::SequenceState state = cpu_model.new_sequence();
    const LogitMatrix ours = cpu_model.prefill(state, ids, LogitRows::all);
    ASSERT_EQ(ours.rows, static_cast<int>(ids.size()));
    ASSERT_EQ(hf_argmax.size(), ids.size());
    std::int64_t prompt_agreements = 0;
    DifferenceStats prompt_max_logit;
    for (int row = 0; row < ours.rows; ++row) {
      const std::int32_t our_choice = argmax_token(ours.row(row));
      const auto r = static_cast<std::size_t>(row);
      const float our_max = ours.row(row)[static_cast<std::size_t>(our_choice)];
      prompt_max_logit.add(std::span<const float>(&our_max, 1),
                           std::span<const float>(&hf_max[r], 1));
      if (our_choice == hf_argmax[r]) {
        ++prompt_agreements;
      } else {
        print(label() + " prompt " + std::to_string(p) + " position " + std::to_string(row) +
              ": ours " + std::to_string(our_choice) + ", HF " + std::to_string(hf_argmax[r]) +
              " (HF top-2 margin " + std::to_string(hf_max[r] - hf_second[r]) + ")");
      }
      const std::string name =
          backend_name(backend()) + ".logits." + std::to_string(p) + "." + std::to_string(row);
      if (reference().contains(name)) {
        const std::vector<float> hf_row = reference().tensor(name, {vocab});
        DifferenceStats stats;
        stats.add(ours.row(row), hf_row);
        print(label() + " full logits at prompt " + std::to_string(p) + " position " +
              std::to_string(row) + ": " + stats.summary());
        EXPECT_LE(stats.relative_norm(), kFullLogitRelativeNorm) << name;
        full.merge(stats);
      }
    }
    print(label() + " prompt " + std::to_string(p) + " (" +
          prompts[p].at("kind").get<std::string>() + ", " + std::to_string(ids.size()) +
          " tokens): top-1 " + std::to_string(prompt_agreements) + "/" +
          std::to_string(ids.size()) + ", max-logit " + prompt_max_logit.summary());
    positions += ours.rows;
    agreements += prompt_agreements;
    max_logit.merge(prompt_max_logit);
  }
  const double fraction = static_cast<double>(agreements) / static_cast<double>(positions);
  print(label() + " all prompts: top-1 " + std::to_string(agreements) + "/" +
        std::to_string(positions) + " (" + std::to_string(100.0 * fraction) + "%), max-logit " +
        max_logit.summary() + "; full logits " + full.summary());
  print("SmolLM2 HF's own eager-vs-sdpa: " + reference().manifest().at("hf_eager_vs_sdpa").dump());
  EXPECT_GE(fraction, kTopOneAgreementFraction);
  const auto stored = reference().manifest().at("full_logits").size();
  EXPECT_EQ(full.count, static_cast<std::int64_t>(stored) * vocab)
      << "not every stored full-logit row was compared";
}

// All prompts decode together (generate_greedy_batch: one decode step per token for the whole
// batch, so the weights are streamed once per step rather than once per prompt); HF generated each
// prompt alone. In f32 the batched rows may sum in another order than single rows (~1e-7), which
// could only matter at an exact near-tie; the fixture's continuations have none.
TEST_P(Smollm2Parity, GreedyMatchesHfGenerate) {
  const model::ModelWeights& weights = smollm2_weights();
  cpu::CpuModel cpu_model(weights, backend());
  const nlohmann::json& prompts = reference().manifest().at("prompts");
  unit::GreedyOptions options;
  options.max_new_tokens = reference().manifest().at("greedy_new_tokens").get<int>();
  options.eos_token_ids = token_ids(reference().manifest().at("eos_token_ids"));
  std::vector<cpu::SequenceState> states;
  LogitMatrix last_logits;
  last_logits.vocab = weights.config.vocab_size;
  for (const nlohmann::json& prompt : prompts) {
    states.push_back(cpu_model.new_sequence());
    const LogitMatrix last =
        cpu_model.prefill(states.back(), token_ids(prompt.at("token_ids")), LogitRows::last);
    last_logits.values.insert(last_logits.values.end(), last.values.begin(), last.values.end());
    ++last_logits.rows;
  }
  std::vector<unit::SequenceCache*> batch;
  for (cpu::SequenceState& state : states) batch.push_back(&state);
  const std::vector<unit::GreedyOutput> outputs =
      unit::generate_greedy_batch(cpu_model, batch, last_logits, options);
  ASSERT_EQ(outputs.size(), prompts.size());
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<std::int32_t> expected =
        token_ids(backend_entry().at("prompts").at(p).at("greedy_new_tokens"));
    const std::vector<std::int32_t>& tokens = outputs[p].tokens;
    std::size_t same = 0;
    while (same < std::min(tokens.size(), expected.size()) && tokens[same] == expected[same]) {
      ++same;
    }
    print(label() + " prompt " + std::to_string(p) + " greedy: first " + std::to_string(same) +
          " of " + std::to_string(expected.size()) + " tokens identical to HF generate" +
          (tokens == expected ? " (all)" : ""));
    EXPECT_GE(same, kGreedyIdenticalTokens) << label() << " prompt " << p;
  }
}

std::string backend_param_name(const ::testing::TestParamInfo<BackendParam>& param_info) {
  return backend_name(param_info.param.backend);
}

INSTANTIATE_TEST_SUITE_P(BothBackends, Smollm2Parity,
                         ::testing::Values(BackendParam{AttentionBackend::eager},
                                           BackendParam{AttentionBackend::sdpa}),
                         backend_param_name);

}  // namespace
}  // namespace kvaudit::parity_test

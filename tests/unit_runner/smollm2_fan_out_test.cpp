// Fan-out == naive on the embedded default model SmolLM2-135M-Instruct (GGUF Q4_1): three chat
// prompts (chatml template, kvpress's context/question split, each part tokenized with the GGUF's
// own tokenizer), the real kvpress-parity methods (methods/method_factory.h), two compressions and
// both protocols: identical kept sets and greedy outputs. Skips, saying why, when the GGUF is
// absent. Built twice: the default grid (label model) and, with KVAUDIT_UNIT_RUNNER_SLOW, all nine
// methods on longer prompts (label slow).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/chat/prompt_split.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/fan_out_check.h"

namespace kvaudit::unit {
namespace {

#ifdef KVAUDIT_UNIT_RUNNER_SLOW
constexpr bool kSlow = true;
#else
constexpr bool kSlow = false;
#endif

const char* const kCities[] = {"Lisbon", "Oslo",  "Quito",   "Hanoi", "Perth",  "Tunis",
                               "Lima",   "Cairo", "Dublin",  "Accra", "Riga",   "Sofia",
                               "Bern",   "Doha",  "Jakarta", "Minsk", "Nairobi"};

// A record-lookup document of `records` sentences and a question about one of them.
model::PromptSplitInput make_prompt(int records, int variant, std::string& context,
                                    std::string& question) {
  context.clear();
  for (int i = 0; i < records; ++i) {
    const int city = (i * 7 + variant) % 17;
    context += "Record " + std::to_string(i + 1) + ": the courier from " + kCities[city] +
               " delivered " + std::to_string(11 + (i * 37 + variant * 13) % 89) +
               " parcels to warehouse " + static_cast<char>('A' + (i + variant) % 26) + ". ";
  }
  const int asked = (records / 2 + variant * 3) % records;
  question = "How many parcels did record " + std::to_string(asked + 1) + " deliver?";
  model::PromptSplitInput input;
  input.kind = model::ChatTemplateKind::chatml;
  input.context = context;
  input.question = question;
  input.answer_prefix = "Answer:";
  return input;
}

std::vector<std::unique_ptr<methods::Method>> real_methods(const std::vector<std::string>& ids) {
  const methods::MethodConfig snap{.name = "snap", .id = "snapkv", .variant = "", .params = {}};
  const methods::ConfigResolver resolve = [&](const std::string& name) {
    return name == "snap" ? &snap : nullptr;
  };
  std::vector<std::unique_ptr<methods::Method>> made;
  for (const std::string& id : ids) {
    methods::MethodConfig config{.name = id, .id = id, .variant = "", .params = {}};
    if (id == "adakv") config.params["scorer"] = std::string("snap");
    made.push_back(methods::make_method(config, resolve));
  }
  return made;
}

TEST(UnitRunnerSmolLM2Test, FanOutEqualsNaiveOnThreeChatPrompts) {
  const std::filesystem::path gguf(KVAUDIT_DEFAULT_GGUF);
  if (!std::filesystem::exists(gguf)) {
    GTEST_SKIP() << "the default model " << gguf
                 << " is absent (tools/setup.sh fetches it); nothing to compare on SmolLM2";
  }
  const model::ModelWeights weights = model::load_model_weights(gguf);
  const std::unique_ptr<model::Tokenizer> tokenizer = model::load_tokenizer(gguf);
  cpu::CpuModel model(weights, AttentionBackend::eager);

  // Default grid (< ~30 s on 2 idle cores): query moments (expected_attention) and window
  // queries with ragged head budgets (adakv over snapkv) on ~90-token prompts; the tiny-model
  // tests cover the other capture items. Slow grid: all nine methods on ~450-token prompts.
  const std::vector<std::string> ids =
      kSlow ? std::vector<std::string>{"knorm",
                                       "snapkv",
                                       "tova",
                                       "observed_attention",
                                       "expected_attention",
                                       "adakv",
                                       "streaming_llm",
                                       "keydiff",
                                       "random"}
            : std::vector<std::string>{"expected_attention", "adakv"};
  const auto methods = real_methods(ids);
  std::vector<CellSpec> cells;
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    cells.push_back({nullptr, {}, protocol, key++});
    for (const auto& method : methods)
      for (double cr : {0.5, 0.9})
        cells.push_back({method.get(), {.compression = cr}, protocol, key++});
  }
  UnitRunOptions options;
  options.decode.max_new_tokens = 8;
  for (int eos : weights.config.eos_token_ids) options.decode.stop_token_ids.push_back(eos);
  options.seed = 2024;

  const model::EncodeOptions plain{.add_special_tokens = false, .parse_special = true};
  for (int variant = 0; variant < 3; ++variant) {
    std::string context, question;
    const model::PromptParts parts =
        model::split_prompt(make_prompt(kSlow ? 24 : 3, variant, context, question));
    UnitTokens tokens;
    tokens.context = tokenizer->encode(parts.prefix_plus_context, plain);
    tokens.question = tokenizer->encode(parts.question, plain);
    tokens.suffix = tokenizer->encode(parts.suffix_plus_answer_prefix, plain);
    ASSERT_GT(tokens.question.size(), 5u);
    ASSERT_GT(tokens.context.size(), 64u);  // longer than SnapKV's window
    const UnitResult result = testing::expect_fan_out_equals_naive(
        model, weights, tokens, cells, options, "SmolLM2 prompt " + std::to_string(variant));
    for (std::size_t i = 0; i < cells.size(); ++i) {
      EXPECT_EQ(result.cells[i].status, CellStatus::ok)
          << testing::describe_cell(cells[i]) << ": " << result.cells[i].error;
      EXPECT_FALSE(result.cells[i].generated.empty()) << testing::describe_cell(cells[i]);
    }
    std::printf("SmolLM2 prompt %d: Lc=%d Lq=%d suffix=%zu, %zu cells, fan-out %.2f s\n", variant,
                result.context_end, result.question_end, tokens.suffix.size(), cells.size(),
                result.timings.total_seconds);
  }
}

}  // namespace
}  // namespace kvaudit::unit

// pred.py's middle truncation against transformers: for every sample record's LongBench prompt and
// every limit in tests/golden/longbench/truncation_expected.json, the C++ tokenizers give the same
// original length, the same truncated text (head and tail halves decoded separately with
// skip_special_tokens, U+FFFD at a seam that splits a character included) and the same length
// after re-tokenization. Tokenizers: the committed golden ones, and SmolLM2's GGUF when present.
#include "suite/benchmarks/longbench/middle_truncation.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "suite/benchmarks/longbench/longbench_jsonl.h"
#include "suite/benchmarks/longbench/longbench_prompt.h"
#include "tests/benchmarks/longbench/longbench_test_paths.h"

namespace kvaudit::benchmarks {
namespace {

const nlohmann::json& expected() {
  static const nlohmann::json j =
      testing::read_json(testing::golden_dir() / "truncation_expected.json");
  return j;
}

// "<file_task>/<_id>" -> the record's LongBench prompt.
const std::map<std::string, std::string>& sample_prompts() {
  static const std::map<std::string, std::string> prompts = [] {
    std::map<std::string, std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(testing::sample_data_dir())) {
      const std::string task = entry.path().stem().string();
      const LongBenchTaskData data = load_longbench_task(testing::sample_data_dir(), task);
      for (const LongBenchRecord& r : data.records) {
        out[task + "/" + r.id] = format_longbench_prompt(r, data.task);
      }
    }
    return out;
  }();
  return prompts;
}

const nlohmann::json* tokenizer_entry(std::string_view path) {
  for (const nlohmann::json& t : expected()["tokenizers"]) {
    if (t["tokenizer"] == path) return &t;
  }
  return nullptr;
}

void check_against_golden(std::string_view relative_path) {
  const nlohmann::json* entry = tokenizer_entry(relative_path);
  ASSERT_NE(entry, nullptr) << relative_path << " is not in truncation_expected.json";
  const auto tokenizer = model::load_tokenizer(testing::source_dir() / relative_path);
  std::size_t truncated = 0;
  std::size_t kept = 0;
  for (const nlohmann::json& c : (*entry)["cases"]) {
    const std::string key = c["file_task"].get<std::string>() + "/" + c["_id"].get<std::string>();
    const auto prompt = sample_prompts().find(key);
    ASSERT_NE(prompt, sample_prompts().end()) << key;
    const auto limit = c["max_length"].get<std::size_t>();
    SCOPED_TRACE(key + " max_length=" + std::to_string(limit));
    const MiddleTruncation cut = middle_truncate(prompt->second, *tokenizer, limit);
    EXPECT_EQ(cut.original_tokens, c["original_tokens"].get<std::size_t>());
    ASSERT_EQ(cut.truncated, c["truncated"].get<bool>());
    if (cut.truncated) {
      EXPECT_EQ(cut.text, c["text"].get<std::string>());
      EXPECT_EQ(cut.kept_tokens_each_side, limit / 2);
      ++truncated;
    } else {
      EXPECT_EQ(cut.text, prompt->second);
      EXPECT_EQ(cut.kept_tokens_each_side, 0u);
      ++kept;
    }
    EXPECT_EQ(tokenizer->encode(cut.text).size(), c["retokenized_tokens"].get<std::size_t>());
  }
  // Both branches are exercised for every tokenizer.
  EXPECT_GT(truncated, 0u);
  EXPECT_GT(kept, 0u);
}

TEST(MiddleTruncation, Gpt2StyleBpeMatchesTransformers) {
  check_against_golden("tests/golden/tokenizers/bpe_gpt2/tokenizer.json");
}

TEST(MiddleTruncation, Llama3StyleBpeWithBosMatchesTransformers) {
  check_against_golden("tests/golden/tokenizers/bpe_llama3/tokenizer.json");
}

TEST(MiddleTruncation, SentencePieceMatchesTransformers) {
  check_against_golden("tests/golden/tokenizers/spm_llama");
}

TEST(MiddleTruncation, SmolLM2GgufMatchesTransformers) {
  const std::string path = "models/smollm2-135m-instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(testing::source_dir() / path)) {
    GTEST_SKIP() << path << " is absent (tools/fetch_default_model.sh fetches it)";
  }
  if (tokenizer_entry(path) == nullptr) {
    GTEST_SKIP() << "truncation_expected.json was generated without " << path
                 << "; rerun tools/golden/make_longbench_golden.py with the model present";
  }
  check_against_golden(path);
}

TEST(MiddleTruncation, HandCheckedHalvesAndLimits) {
  const auto tokenizer = model::load_tokenizer(testing::source_dir() /
                                               "tests/golden/tokenizers/bpe_gpt2/tokenizer.json");
  const std::string text = "alpha beta gamma delta epsilon zeta eta theta iota kappa";
  const auto ids = tokenizer->encode(text);
  ASSERT_GT(ids.size(), 7u);
  const std::span<const std::int32_t> all(ids);
  // An odd limit keeps int(7/2) = 3 tokens on each side.
  const MiddleTruncation cut = middle_truncate(text, *tokenizer, 7);
  EXPECT_TRUE(cut.truncated);
  EXPECT_EQ(cut.kept_tokens_each_side, 3u);
  EXPECT_EQ(cut.text, tokenizer->decode(all.first(3), true) + tokenizer->decode(all.last(3), true));
  // Byte-level BPE decodes losslessly: the result is a head and a tail of the original text.
  const std::string head = tokenizer->decode(all.first(3), true);
  const std::string tail = tokenizer->decode(all.last(3), true);
  EXPECT_TRUE(text.starts_with(head) && text.ends_with(tail)) << head << "|" << tail;
  EXPECT_LT(head.size() + tail.size(), text.size());
  // Exactly at the limit: unchanged.
  const MiddleTruncation fits = middle_truncate(text, *tokenizer, ids.size());
  EXPECT_FALSE(fits.truncated);
  EXPECT_EQ(fits.text, text);
  EXPECT_EQ(fits.original_tokens, ids.size());
  // One below: cut.
  EXPECT_TRUE(middle_truncate(text, *tokenizer, ids.size() - 1).truncated);
  EXPECT_THROW((void)middle_truncate(text, *tokenizer, 1), std::invalid_argument);
  EXPECT_THROW((void)middle_truncate(text, *tokenizer, 0), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::benchmarks

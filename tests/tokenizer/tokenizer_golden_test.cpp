// Golden tests: every tokenizer in tests/golden/tokenizers/expectations.json (made by
// tools/golden/make_tokenizer_golden.py with HF tokenizers / transformers) encodes every golden
// text to exactly HF's ids (with and without special tokens, and with special-token literals kept
// as text) and decodes to exactly HF's strings (with and without skip_special_tokens, and the ids
// minus the last one, which cuts multi-byte characters).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runners/model/tokenizer/tokenizer.h"

namespace kvaudit::model {
namespace {

const std::filesystem::path kRepository = KVAUDIT_SOURCE_DIR;
const std::filesystem::path kExpectations =
    kRepository / "tests/golden/tokenizers/expectations.json";

// Every tokenizer the generator writes; the test below checks the file has exactly these.
const std::vector<std::string> kTokenizerNames = {
    "bpe_gpt2",         "bpe_gpt2_variant", "bpe_llama3", "bpe_qwen2",   "spm_llama",
    "spm_llama_legacy", "gguf_llama_bpe",   "gguf_qwen2", "gguf_smollm2"};

const nlohmann::json& expectations() {
  static const nlohmann::json parsed = [] {
    std::ifstream in(kExpectations);
    if (!in) throw std::runtime_error("cannot read " + kExpectations.string());
    return nlohmann::json::parse(in);
  }();
  return parsed;
}

std::string show_ids(const std::vector<std::int32_t>& ids) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out << (i ? ", " : "") << ids[i];
  out << "]";
  return out.str();
}

// A readable diff: where the two id lists first differ.
std::string id_mismatch(const std::vector<std::int32_t>& ours,
                        const std::vector<std::int32_t>& hf) {
  std::size_t i = 0;
  while (i < ours.size() && i < hf.size() && ours[i] == hf[i]) ++i;
  return "first difference at index " + std::to_string(i) + "\n  ours: " + show_ids(ours) +
         "\n  HF:   " + show_ids(hf);
}

TEST(TokenizerGolden, ExpectationsListExactlyTheTestedTokenizers) {
  std::set<std::string> in_file;
  for (const auto& [name, entry] : expectations().at("tokenizers").items()) in_file.insert(name);
  std::set<std::string> tested(kTokenizerNames.begin(), kTokenizerNames.end());
  EXPECT_EQ(in_file, tested);
  EXPECT_GE(expectations().at("texts").size(), 40u);
}

class TokenizerGoldenTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const auto& all = expectations().at("tokenizers");
    // Every tokenizer under test has committed expectations: one gone missing is a failure.
    ASSERT_TRUE(all.contains(GetParam()))
        << GetParam() << " has no expectations in the committed " << kExpectations;
    entry_ = &all.at(GetParam());
    const std::filesystem::path path = kRepository / entry_->at("path").get<std::string>();
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << path << " is absent (fetch it with tools/fetch_default_model.sh)";
    }
    tokenizer_ = load_tokenizer(path);
  }

  const nlohmann::json* entry_ = nullptr;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(TokenizerGoldenTest, EncodesEveryTextToHfIds) {
  const auto& texts = expectations().at("texts");
  const auto& cases = entry_->at("cases");
  ASSERT_EQ(cases.size(), texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const auto& expected = cases[i];
    SCOPED_TRACE("text " + std::to_string(i) + ": " + nlohmann::json(text).dump());
    const auto with_special =
        tokenizer_->encode(text, {.add_special_tokens = true, .parse_special = true});
    const auto hf_with = expected.at("ids").get<std::vector<std::int32_t>>();
    EXPECT_EQ(with_special, hf_with) << id_mismatch(with_special, hf_with);
    const auto plain =
        tokenizer_->encode(text, {.add_special_tokens = false, .parse_special = true});
    const auto hf_plain = expected.at("ids_without_special").get<std::vector<std::int32_t>>();
    EXPECT_EQ(plain, hf_plain) << id_mismatch(plain, hf_plain);
    const auto literal =
        tokenizer_->encode(text, {.add_special_tokens = false, .parse_special = false});
    const auto hf_literal = expected.at("ids_special_as_text").get<std::vector<std::int32_t>>();
    EXPECT_EQ(literal, hf_literal) << id_mismatch(literal, hf_literal);
  }
}

TEST_P(TokenizerGoldenTest, DecodesLikeHf) {
  const auto& cases = entry_->at("cases");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& expected = cases[i];
    SCOPED_TRACE("text " + std::to_string(i));
    const auto ids = expected.at("ids").get<std::vector<std::int32_t>>();
    EXPECT_EQ(tokenizer_->decode(ids, false), expected.at("decoded").get<std::string>());
    EXPECT_EQ(tokenizer_->decode(ids, true),
              expected.at("decoded_skip_special").get<std::string>());
    if (expected.contains("decoded_without_last")) {
      auto cut = expected.at("ids_without_special").get<std::vector<std::int32_t>>();
      cut.pop_back();
      EXPECT_EQ(tokenizer_->decode(cut, false),
                expected.at("decoded_without_last").get<std::string>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllGoldenTokenizers, TokenizerGoldenTest,
                         testing::ValuesIn(kTokenizerNames),
                         [](const testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

}  // namespace
}  // namespace kvaudit::model

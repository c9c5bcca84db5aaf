// tokenizer.json parsing: a small valid file loads and encodes as expected, and each kind of
// malformed or unsupported file is rejected with a ModelInputError naming the file, the JSON path
// and what is wrong.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runners/model/model_error.h"
#include "runners/model/tokenizer/bpe_tokenizer.h"
#include "runners/model/tokenizer/byte_level.h"
#include "runners/model/tokenizer/tokenizer_json.h"

namespace kvaudit::model {
namespace {

using nlohmann::json;

// 256 byte symbols (ids 0..255), "he" (256), "Ġt" (257), "Ġthe" would need "Ġt"+"he" (258),
// an <|endoftext|> special token (259) and a template that adds it in front.
json valid_tokenizer() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b)
    vocab[std::string(byte_level_symbol(static_cast<std::uint8_t>(b)))] = b;
  vocab["he"] = 256;
  vocab["\xC4\xA0t"] = 257;
  vocab["\xC4\xA0the"] = 258;
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", json::array({{{"id", 259},
                                         {"content", "<|endoftext|>"},
                                         {"single_word", false},
                                         {"lstrip", false},
                                         {"rstrip", false},
                                         {"normalized", false},
                                         {"special", true}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"pair", json::array()},
            {"special_tokens",
             {{"<|endoftext|>",
               {{"id", "<|endoftext|>"}, {"ids", {259}}, {"tokens", {"<|endoftext|>"}}}}}}}},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", json::array({json::array({"h", "e"}), json::array({"\xC4\xA0", "t"}),
                                    json::array({"\xC4\xA0t", "he"})})}}}};
}

BpeTokenizer build(const std::string& text) {
  return BpeTokenizer(parse_tokenizer_json(text, "test/tokenizer.json"));
}

// Asserts that `text` is rejected and that the message has the file name and every fragment.
void expect_rejected(const std::string& text, const std::vector<std::string>& fragments) {
  try {
    (void)build(text);
    ADD_FAILURE() << "accepted a malformed tokenizer.json";
  } catch (const ModelInputError& e) {
    const std::string message = e.what();
    EXPECT_TRUE(message.starts_with("test/tokenizer.json: ")) << message;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "missing '" << fragment << "' in: " << message;
    }
  }
}

void expect_rejected(const json& j, const std::vector<std::string>& fragments) {
  expect_rejected(j.dump(), fragments);
}

TEST(TokenizerJson, ValidFileEncodesAndDecodes) {
  const BpeTokenizer t = build(valid_tokenizer().dump());
  EXPECT_EQ(t.encode("he the"), (std::vector<std::int32_t>{259, 256, 258}));
  EXPECT_EQ(t.encode("he the", {.add_special_tokens = false}),
            (std::vector<std::int32_t>{256, 258}));
  EXPECT_EQ(t.encode("<|endoftext|>x", {.add_special_tokens = false}),
            (std::vector<std::int32_t>{259, 'x'}));
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{259, 256, 258}), "<|endoftext|>he the");
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{259, 256, 258}, true), "he the");
  EXPECT_EQ(t.bos_id(), 259);
  EXPECT_EQ(t.vocab_size(), 260u);
  EXPECT_TRUE(t.is_special(259));
  EXPECT_FALSE(t.is_special(256));
  EXPECT_EQ(t.token_to_id("\xC4\xA0the"), 258);
  EXPECT_EQ(t.id_to_token(257), "\xC4\xA0t");
  EXPECT_EQ(t.id_to_token(5000), std::nullopt);
}

TEST(TokenizerJson, LegacyMergeStringsEqualPairs) {
  json j = valid_tokenizer();
  j["model"]["merges"] = json::array({"#version: 0.2", "h e", "\xC4\xA0 t", "\xC4\xA0t he"});
  EXPECT_EQ(build(j.dump()).encode("he the"), (std::vector<std::int32_t>{259, 256, 258}));
}

TEST(TokenizerJson, RejectsInvalidJsonAndDuplicateKeys) {
  expect_rejected(std::string("{\"model\": "), {"invalid JSON"});
  expect_rejected(std::string(R"({"model": {"type": "BPE", "type": "BPE"}})"),
                  {"duplicate key", "model.type"});
}

TEST(TokenizerJson, RejectsAnUnsupportedModelType) {
  json j = valid_tokenizer();
  j["model"]["type"] = "WordPiece";
  expect_rejected(j, {"model.type", "'WordPiece' is not supported"});
  j.erase("model");
  expect_rejected(j, {"model: is missing"});
}

TEST(TokenizerJson, RejectsBadVocabularyIds) {
  json j = valid_tokenizer();
  j["model"]["vocab"]["he"] = "5";
  expect_rejected(j, {"model.vocab.'he'", "expected an integer, found string"});
  j["model"]["vocab"]["he"] = -1;
  expect_rejected(j, {"model.vocab.'he'", "outside [0, 2147483647]"});
  j["model"]["vocab"]["he"] = 16000000;
  expect_rejected(j, {"model.vocab", "too sparse"});
  j["model"]["vocab"]["he"] = 255;
  expect_rejected(j, {"model.vocab", "id 255 is used by both"});
  j = valid_tokenizer();
  j["model"]["vocab"] = json::array();
  expect_rejected(j, {"model.vocab", "expected an object, found array"});
}

TEST(TokenizerJson, RejectsMergesOutsideTheVocabulary) {
  json j = valid_tokenizer();
  j["model"]["merges"].push_back(json::array({"h", "zz"}));
  expect_rejected(j, {"model.merges[3]", "'zz' is not in the vocabulary"});
  j = valid_tokenizer();
  j["model"]["merges"].push_back(json::array({"a", "b"}));
  expect_rejected(j, {"model.merges[3]", "'ab', is not in the vocabulary"});
  j = valid_tokenizer();
  j["model"]["merges"] = json::array({"h e x"});
  expect_rejected(j, {"model.merges[0]", "not two tokens separated by one space"});
  j["model"]["merges"] = json::array({json::array({"h"})});
  expect_rejected(j, {"model.merges[0]", "expected a pair of strings"});
}

TEST(TokenizerJson, RejectsAddedTokenIdsTokenizersWouldNotAssign) {
  json j = valid_tokenizer();
  j["added_tokens"][0]["id"] = 300;
  expect_rejected(j, {"added_tokens[0].id", "300 differs from the id tokenizers gives", "259"});
  j = valid_tokenizer();
  j["added_tokens"][0]["content"] = "he";
  expect_rejected(j, {"added_tokens[0].id", "its model.vocab id"});
  j = valid_tokenizer();
  j["added_tokens"][0]["content"] = "";
  expect_rejected(j, {"added_tokens[0].content", "is empty"});
}

TEST(TokenizerJson, RejectsUnsupportedNormalizers) {
  json j = valid_tokenizer();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_rejected(j, {"normalizer.type", "'Lowercase' is not supported"});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "NFKC"}}})}};
  expect_rejected(j, {"normalizer.normalizers[1].type", "'NFKC'"});
}

TEST(TokenizerJson, RejectsUnsupportedPreTokenizers) {
  const json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", "\\s+"}}},
                {"behavior", "Removed"},
                {"invert", false}};
  json j = valid_tokenizer();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
  expect_rejected(j, {"pre_tokenizer.pretokenizers[0].behavior", "'Removed' is not supported"});
  split["behavior"] = "Isolated";
  split["pattern"] = {{"Regex", "(unclosed"}};
  j["pre_tokenizer"]["pretokenizers"] = json::array({split, byte_level});
  expect_rejected(j, {"pre_tokenizer.pretokenizers[0].pattern.Regex", "does not compile"});
  split["pattern"] = {{"Regex", "\\s+"}};
  j["pre_tokenizer"]["pretokenizers"] = json::array({byte_level, split});
  expect_rejected(j, {"pre_tokenizer.pretokenizers[1]", "nothing may follow the ByteLevel stage"});
  j["pre_tokenizer"]["pretokenizers"] = json::array({split});
  expect_rejected(j, {"pre_tokenizer.pretokenizers", "no ByteLevel stage"});
  j["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_rejected(j, {"pre_tokenizer.type", "'Metaspace' is not supported"});
  j["pre_tokenizer"] = nullptr;
  expect_rejected(j, {"pre_tokenizer", "needs a ByteLevel pre-tokenizer"});
}

TEST(TokenizerJson, RejectsUnsupportedPostProcessorsAndTemplates) {
  json j = valid_tokenizer();
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_rejected(j, {"post_processor.type", "'RobertaProcessing' is not supported"});
  j = valid_tokenizer();
  j["post_processor"]["single"][0]["SpecialToken"]["id"] = "<missing>";
  expect_rejected(j, {"post_processor.single[0].SpecialToken.id", "'<missing>' is not in"});
  j = valid_tokenizer();
  j["post_processor"]["special_tokens"]["<|endoftext|>"]["ids"] = json::array({9999});
  expect_rejected(j, {"special tokens", "id 9999 is no token"});
  j = valid_tokenizer();
  j["post_processor"]["single"].erase(1);
  expect_rejected(j, {"post_processor.single", "has no $A"});
  j = valid_tokenizer();
  json nested = {{"type", "ByteLevel"}};
  for (int i = 0; i < 20; ++i)
    nested = {{"type", "Sequence"}, {"processors", json::array({nested})}};
  j["post_processor"] = nested;
  expect_rejected(j, {"post_processor.processors[0]", "nest deeper than 16 levels"});
}

TEST(TokenizerJson, RejectsModelOptionsThatAreNotByteLevelBpe) {
  json j = valid_tokenizer();
  j["model"]["byte_fallback"] = true;
  expect_rejected(j, {"model.byte_fallback", "not supported"});
  j = valid_tokenizer();
  j["model"]["dropout"] = 0.1;
  expect_rejected(j, {"model.dropout", "random"});
  j = valid_tokenizer();
  j["model"]["continuing_subword_prefix"] = "##";
  expect_rejected(j, {"model.continuing_subword_prefix"});
  j = valid_tokenizer();
  j["model"]["unk_token"] = "<unk>";
  expect_rejected(j, {"unk_token", "'<unk>' is not in the vocabulary"});
}

TEST(TokenizerJson, RejectsOtherDecodersAndVersions) {
  json j = valid_tokenizer();
  j["decoder"] = {{"type", "Metaspace"}};
  expect_rejected(j, {"decoder.type", "'Metaspace' is not supported"});
  j = valid_tokenizer();
  j["version"] = "2.0";
  expect_rejected(j, {"version", "expected \"1.0\""});
  expect_rejected(json::array(), {"(top level)", "expected an object, found array"});
}

TEST(TokenizerJson, EncodeRejectsInvalidUtf8Text) {
  const BpeTokenizer t = build(valid_tokenizer().dump());
  try {
    (void)t.encode("ok\xC3");
    FAIL() << "expected ModelInputError";
  } catch (const ModelInputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "test/tokenizer.json: text to encode is not valid UTF-8 (byte 2"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvaudit::model

// GGUF tokenizer metadata: a small in-memory GGUF builds the expected byte-level BPE (respelling,
// control / user-defined tokens, BOS, pre-tokenizer names), and malformed or unsupported metadata
// is rejected with a ModelInputError naming the file and the metadata key.
#include "runners/model/tokenizer/gguf_tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runners/model/formats/gguf.h"
#include "runners/model/model_error.h"
#include "runners/model/tokenizer/bpe_tokenizer.h"
#include "runners/model/tokenizer/byte_level.h"
#include "tests/tokenizer/gguf_bytes.h"

namespace kvaudit::model {
namespace {

using testing_gguf::GgufBytes;

constexpr std::int32_t kHe = 256;
constexpr std::int32_t kImStart = 257;
constexpr std::int32_t kThink = 258;
constexpr std::int32_t kSpaced = 259;

struct Metadata {
  std::string model = "gpt2";
  std::string pre = "smollm";
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  std::vector<std::string> merges = {"h e"};
  bool with_merges = true;
  std::uint32_t bos = kImStart;
  bool add_bos = true;

  Metadata() {
    for (int b = 0; b < 256; ++b)
      tokens.emplace_back(byte_level_symbol(static_cast<std::uint8_t>(b)));
    tokens.insert(tokens.end(), {"he", "<|im_start|>", "<think>", "a b"});
    types.assign(tokens.size(), 1);
    types[kImStart] = 3;  // CONTROL
    types[kThink] = 4;    // USER_DEFINED
  }

  std::vector<std::uint8_t> bytes() const {
    GgufBytes g;
    g.string("general.architecture", "llama")
        .string("tokenizer.ggml.model", model)
        .string("tokenizer.ggml.pre", pre)
        .strings("tokenizer.ggml.tokens", tokens)
        .i32s("tokenizer.ggml.token_type", types)
        .u32("tokenizer.ggml.bos_token_id", bos)
        .boolean("tokenizer.ggml.add_bos_token", add_bos);
    if (with_merges) g.strings("tokenizer.ggml.merges", merges);
    return g.bytes();
  }
};

BpeTokenizer build(const Metadata& m) {
  const std::vector<std::uint8_t> bytes = m.bytes();
  const GgufFile file = GgufFile::parse(bytes, "test.gguf");
  return BpeTokenizer(gguf_bpe_vocabulary(file));
}

void expect_rejected(const Metadata& m, const std::vector<std::string>& fragments) {
  try {
    (void)build(m);
    ADD_FAILURE() << "accepted malformed GGUF tokenizer metadata";
  } catch (const ModelInputError& e) {
    const std::string message = e.what();
    EXPECT_TRUE(message.starts_with("test.gguf")) << message;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "missing '" << fragment << "' in: " << message;
    }
  }
}

TEST(GgufTokenizer, BuildsTheVocabularyTransformersBuilds) {
  const BpeTokenizer t = build(Metadata());
  EXPECT_EQ(t.encode("<|im_start|>he<think>"),
            (std::vector<std::int32_t>{kImStart, kImStart, kHe, kThink}));
  EXPECT_EQ(t.encode("he", {.add_special_tokens = false}), (std::vector<std::int32_t>{kHe}));
  EXPECT_TRUE(t.is_special(kImStart));
  EXPECT_FALSE(t.is_special(kThink));
  EXPECT_EQ(t.bos_id(), kImStart);
  // "a b" uses a character outside the byte-level alphabet (' '), so it is respelled "aĠb".
  EXPECT_EQ(t.token_to_id("a\xC4\xA0"
                          "b"),
            kSpaced);
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{kSpaced, kThink}), "a b<think>");
  // With special tokens kept as text, the control token is byte-level BPE'd.
  EXPECT_NE(t.encode("<|im_start|>", {.add_special_tokens = false, .parse_special = false}),
            (std::vector<std::int32_t>{kImStart}));
}

TEST(GgufTokenizer, SelectsThePreTokenizerByName) {
  Metadata m;
  m.tokens.push_back("1");  // already a byte symbol: a duplicate spelling keeps the last index
  m.types.push_back(1);
  m.pre = "qwen2";
  EXPECT_EQ(build(m).encode("12", {.add_special_tokens = false}),
            (std::vector<std::int32_t>{static_cast<std::int32_t>(m.tokens.size() - 1), '2'}));
  m.pre = "llama-bpe";
  EXPECT_NO_THROW((void)build(m));
}

TEST(GgufTokenizer, RejectsOtherTokenizerModels) {
  Metadata m;
  m.model = "llama";
  expect_rejected(m, {"tokenizer.ggml.model", "SentencePiece", "tokenizer.model instead"});
  m.model = "bert";
  expect_rejected(m, {"tokenizer.ggml.model", "'bert' is not supported"});
}

TEST(GgufTokenizer, RejectsUnknownPreTokenizersListingTheKnownOnes) {
  Metadata m;
  m.pre = "mystery";
  expect_rejected(
      m, {"tokenizer.ggml.pre", "'mystery'", "known: default, gpt-2", "llama-bpe", "qwen2"});
}

TEST(GgufTokenizer, RejectsMissingOrMalformedMerges) {
  Metadata m;
  m.with_merges = false;
  expect_rejected(m, {"tokenizer.ggml.merges", "is missing"});
  m = Metadata();
  m.merges = {"h e x"};
  expect_rejected(m, {"tokenizer.ggml.merges", "entry 0", "not two tokens"});
  m.merges = {"h z"};
  m.tokens[kHe] = "hz";  // keep "he" absent so that the merge result is missing too
  m.merges = {"q he"};
  expect_rejected(m, {"tokenizer.ggml.merges[0]", "'he' is not in the vocabulary"});
}

TEST(GgufTokenizer, RejectsInconsistentTokenMetadata) {
  Metadata m;
  m.types.pop_back();
  expect_rejected(m, {"tokenizer.ggml.token_type", "259 entries for 260 tokens"});
  m = Metadata();
  m.tokens[kSpaced] = "bad\xFF";
  expect_rejected(m, {"tokenizer.ggml.tokens", "token 259 is not valid UTF-8"});
  m = Metadata();
  m.bos = 9999;
  expect_rejected(m, {"tokenizer.ggml.bos_token_id", "id 9999 is outside the 260 tokens"});
  m = Metadata();
  m.tokens.clear();
  m.types.clear();
  expect_rejected(m, {"tokenizer.ggml.tokens", "empty"});
}

}  // namespace
}  // namespace kvaudit::model

// SentencePiece: the golden model loads with the expected special tokens and options, and
// malformed models (truncated, garbage, no pieces, unsupported model types) and inconsistent
// tokenizer_config.json entries are rejected with a ModelInputError naming the file.
#include "runners/model/tokenizer/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "runners/model/model_error.h"

namespace kvaudit::model {
namespace {

const std::filesystem::path kModelDir =
    std::filesystem::path(KVAUDIT_SOURCE_DIR) / "tests/golden/tokenizers/spm_llama";

std::string golden_model_bytes() {
  std::ifstream in(kModelDir / "tokenizer.model", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Protobuf wire encoding, enough to write small ModelProto messages by hand.
void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void length_field(std::string& out, std::uint32_t number, const std::string& payload) {
  varint(out, (std::uint64_t{number} << 3) | 2);
  varint(out, payload.size());
  out += payload;
}
void varint_field(std::string& out, std::uint32_t number, std::uint64_t value) {
  varint(out, std::uint64_t{number} << 3);
  varint(out, value);
}
std::string piece(const std::string& text, std::uint64_t type) {
  std::string p;
  length_field(p, 1, text);
  varint_field(p, 3, type);
  return p;
}
std::string model_proto(std::uint64_t model_type) {
  std::string trainer;
  varint_field(trainer, 3, model_type);
  std::string model;
  length_field(model, 1, piece("<unk>", 2));
  length_field(model, 1, piece("<s>", 3));
  length_field(model, 1, piece("a", 1));
  length_field(model, 2, trainer);
  return model;
}

void expect_rejected(const std::string& bytes, const std::vector<std::string>& fragments,
                     const std::optional<HfTokenizerConfig>& config = std::nullopt) {
  try {
    SentencePieceTokenizer t(bytes, "test/tokenizer.model", config, {});
    ADD_FAILURE() << "accepted a malformed SentencePiece model";
  } catch (const ModelInputError& e) {
    const std::string message = e.what();
    for (const std::string& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "missing '" << fragment << "' in: " << message;
    }
  }
}

TEST(SentencePieceTokenizer, LoadsTheGoldenModelWithItsConfig) {
  const auto t = load_tokenizer(kModelDir);
  EXPECT_NE(t->description().find("SentencePiece BPE"), std::string::npos);
  EXPECT_NE(t->description().find("prefix space: first"), std::string::npos);
  EXPECT_EQ(t->vocab_size(), 1200u);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_ids(), std::vector<std::int32_t>{2});
  EXPECT_TRUE(t->is_special(1));
  EXPECT_TRUE(t->is_special(3));                                   // [INST], a control piece
  EXPECT_FALSE(t->is_special(t->token_to_id("<think>").value()));  // user-defined: not special
  EXPECT_EQ(t->id_to_token(2), "</s>");
  EXPECT_EQ(t->encode("").size(), 1u);  // BOS only (add_bos_token: true)
  EXPECT_EQ(t->encode("", {.add_special_tokens = false}).size(), 0u);
}

TEST(SentencePieceTokenizer, WithoutAConfigAddsNoBosLikeTransformers) {
  const std::string bytes = golden_model_bytes();
  const SentencePieceTokenizer t(bytes, "tokenizer.model", std::nullopt, {});
  EXPECT_EQ(t.encode("hi"), t.encode("hi", {.add_special_tokens = false}));
  HfTokenizerConfig config;
  config.add_bos_token = true;
  config.add_eos_token = true;
  const SentencePieceTokenizer both(bytes, "tokenizer.model", config, {7});
  const auto ids = both.encode("hi");
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  EXPECT_EQ(both.eos_ids(), (std::vector<std::int32_t>{2, 7}));
}

TEST(SentencePieceTokenizer, RejectsTruncatedAndGarbageModels) {
  const std::string bytes = golden_model_bytes();
  // Cut inside the last field, so a length prefix claims more bytes than remain.
  expect_rejected(bytes.substr(0, bytes.size() - 3),
                  {"test/tokenizer.model", "not a valid SentencePiece model", "at byte", "remain"});
  expect_rejected("this is not a protobuf",
                  {"test/tokenizer.model", "not a valid SentencePiece model"});
  expect_rejected(std::string(), {"test/tokenizer.model", "has no pieces"});
  std::string group;
  varint(group, (std::uint64_t{1} << 3) | 3);  // a (deprecated) group start
  expect_rejected(group, {"unsupported wire type 3"});
}

TEST(SentencePieceTokenizer, RejectsNonBpeModels) {
  expect_rejected(model_proto(1),
                  {"test/tokenizer.model", "trainer_spec.model_type: UNIGRAM is not supported"});
  std::string no_trainer;
  length_field(no_trainer, 1, piece("a", 1));
  expect_rejected(no_trainer, {"trainer_spec is missing"});
  std::string bad_type;
  length_field(bad_type, 1, piece("a", 9));
  expect_rejected(bad_type, {"ModelProto.pieces[0].type: unknown piece type 9"});
}

TEST(SentencePieceTokenizer, RejectsConfigTokensThatAreNotPieces) {
  const std::string bytes = golden_model_bytes();
  HfTokenizerConfig config;
  config.source = "test/tokenizer_config.json";
  AddedToken wrong;
  wrong.id = 5;
  wrong.content = "<wrong>";
  config.added_tokens_decoder = {wrong};
  expect_rejected(
      bytes, {"test/tokenizer_config.json: added_tokens_decoder.'5'", "differs from the piece"},
      config);
  wrong.id = 99999;
  config.added_tokens_decoder = {wrong};
  expect_rejected(bytes, {"added_tokens_decoder.'99999'", "past the SentencePiece vocabulary"},
                  config);
}

}  // namespace
}  // namespace kvaudit::model

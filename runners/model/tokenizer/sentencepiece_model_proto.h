// Minimal protobuf wire-format reader/rewriter for SentencePiece's ModelProto (tokenizer.model).
//
// Field numbers (sentencepiece_model.proto, as shipped in the sentencepiece Python package):
//   ModelProto      pieces = 1, trainer_spec = 2, normalizer_spec = 3, denormalizer_spec = 5
//   SentencePiece   piece = 1, score = 2, type = 3 (1 NORMAL default, 2 UNKNOWN, 3 CONTROL,
//                   4 USER_DEFINED, 5 UNUSED, 6 BYTE)
//   TrainerSpec     model_type = 3 (1 UNIGRAM default, 2 BPE, 3 WORD, 4 CHAR),
//                   treat_whitespace_as_suffix = 24, byte_fallback = 35
//   NormalizerSpec  name = 1, precompiled_charsmap = 2, add_dummy_prefix = 3,
//                   remove_extra_whitespaces = 4, escape_whitespaces = 5, normalization_rule_tsv =
//                   6
//
// Why rewrite: transformers 5 (LlamaTokenizer, tokenizers backend) does no SentencePiece
// normalization. It replaces ' ' by U+2581 and prepends U+2581 itself, only to the first piece of
// the text (legacy=false) or to every piece after an added token (legacy=true), and never when the
// piece already starts with one. libsentencepiece would add its dummy prefix to every Encode call
// and apply the model's charsmap and whitespace rules, so the tokenizer loads a copy of the model
// whose normalizer_spec is replaced by an identity spec (no charsmap, no dummy prefix, no
// whitespace removal, spaces escaped) and does the HF part itself. The BPE and byte fallback stay
// libsentencepiece's.
//
// Every read is bounds-checked; malformed input is a ModelInputError naming the file and the byte
// offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvaudit::model {

enum class SentencePieceType : std::int64_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct SentencePieceEntry {
  std::string piece;
  SentencePieceType type = SentencePieceType::kNormal;
};

struct SentencePieceModelSummary {
  std::string identity_normalizer_model;  // serialized ModelProto with the normalizer replaced
  std::int64_t model_type = 1;            // TrainerSpec.model_type (absent = UNIGRAM)
  bool byte_fallback = false;
  bool treat_whitespace_as_suffix = false;
  std::vector<SentencePieceEntry> pieces;  // in id order
};

SentencePieceModelSummary prepare_sentencepiece_model(std::string_view serialized,
                                                      const std::string& source);

}  // namespace kvaudit::model

// tokenizer.json (HF tokenizers' serialization) -> BpeVocabulary, for byte-level BPE models.
//
// Accepted (anything else is a ModelInputError naming the file, the JSON path and what is wrong):
//   model           {"type": "BPE", vocab {token: id}, merges ["a b", ...] or [["a", "b"], ...]
//                   (lines starting "#version" skipped), unk_token, fuse_unk, ignore_merges,
//                   dropout null/0, byte_fallback false, continuing_subword_prefix and
//                   end_of_word_suffix null/""}
//   added_tokens    [{id, content, special, lstrip, rstrip, single_word, normalized}]; ids as HF
//                   assigns them: a content in model.vocab keeps its vocab id, the others follow
//                   the vocabulary in order (len(vocab), len(vocab)+1, ...)
//   normalizer      null, NFC, or a Sequence of NFC only
//   pre_tokenizer   ByteLevel{add_prefix_space, use_regex}, or a Sequence of Split{pattern
//                   {"Regex"|"String"}, behavior "Isolated", invert false} / Digits
//                   {individual_digits} stages ending with exactly one ByteLevel
//   post_processor  null, ByteLevel, TemplateProcessing (single = special tokens around one $A),
//                   or a Sequence of these -> the ids add_special_tokens adds
//   decoder         ByteLevel
//   version         "1.0" when present; truncation and padding are ignored (transformers turns
//                   them off unless a call asks for them).
// BOS is taken as the template's only leading special token, when there is exactly one; the HF
// directory loader (tokenizer.h) overrides BOS/EOS from tokenizer_config.json.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "runners/model/tokenizer/bpe_vocabulary.h"

namespace kvaudit::model {

// Parses tokenizer.json text; `source` names the file in messages.
BpeVocabulary parse_tokenizer_json(std::string_view json_text, const std::string& source);

// Reads and parses the file at `path`.
BpeVocabulary read_tokenizer_json(const std::filesystem::path& path);

}  // namespace kvaudit::model

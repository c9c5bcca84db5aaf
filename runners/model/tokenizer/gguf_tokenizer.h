// Byte-level BPE from a GGUF file's tokenizer.ggml.* metadata, built the way transformers 5.24
// builds it (integrations/gguf/gguf_tokenizer_mapping.py: byte_level_tokenizer,
// add_gguf_special_tokens, set_split_regex; then TokenizersBackend), so that ids match
// AutoTokenizer.from_pretrained(..., gguf_file=...):
//
//   * tokenizer.ggml.model must be "gpt2" ("llama", SentencePiece in GGUF, is rejected: load the
//     model directory's tokenizer.model instead);
//   * vocabulary = tokenizer.ggml.tokens by index; a token using characters outside the byte-level
//     alphabet is respelled as the byte-level symbols of its UTF-8 bytes; a repeated spelling
//     keeps its last index (a Python dict);
//   * merges = tokenizer.ggml.merges ("a b"); no normalizer, no ignore_merges, no unk;
//   * token_type 3 (CONTROL) tokens spelled in the alphabet become special added tokens, type 4
//     (USER_DEFINED) tokens in the vocabulary plain added tokens; the BOS/EOS/UNK/PAD tokens and
//     GPT2Tokenizer's default "<|endoftext|>" become special too when the vocabulary has them.
//     (transformers would also invent ids past the vocabulary for such names that it lacks, e.g.
//     "<|endoftext|>" in a Llama-3 GGUF; those ids have no embedding row, so they are not made.)
//   * pre-tokenizer by tokenizer.ggml.pre (pretokenizer_patterns.h): GPT-2's ByteLevel regex, or
//     the named Split regex + ByteLevel(use_regex=false); a missing key means "default"; unknown
//     names are an error listing the known ones;
//   * add_special_tokens adds BOS when tokenizer.ggml.add_bos_token, EOS when
//     tokenizer.ggml.add_eos_token (both default false);
//   * eos_ids: EOS, then tokenizer.ggml.eot_token_id and eom_token_id when present.
#pragma once

#include <filesystem>
#include <memory>

#include "runners/model/formats/gguf.h"
#include "runners/model/tokenizer/bpe_vocabulary.h"
#include "runners/model/tokenizer/tokenizer.h"

namespace kvaudit::model {

BpeVocabulary gguf_bpe_vocabulary(const GgufFile& file);

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& path);

}  // namespace kvaudit::model

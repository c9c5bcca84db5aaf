// Pre-tokenizer split patterns of the common byte-level BPE families, and the GGUF
// tokenizer.ggml.pre names that select them.
//
// Sources: GPT-2 from HF tokenizers pre_tokenizers/byte_level.rs; Llama-3 and Qwen2 verbatim from
// llama.cpp src/llama-vocab.cpp and transformers models/qwen2/tokenization_qwen2.py
// (docs/design/tokenizers.md §Pre-tokenizer patterns); Qwen3.5, Tekken and GPT-4o from
// transformers 5.24 integrations/gguf/gguf_tokenizer_mapping.py and
// models/qwen3_5/tokenization_qwen3_5.py. The name
// table mirrors transformers' GGUF_PRE_TOKENIZER_SPLITS (the names it maps to a Split regex); the
// names it leaves on GPT2Tokenizer's ByteLevel(use_regex=True) that we accept are "default",
// "gpt-2", "gpt2" and "smollm".
//
// Note on "smollm": llama.cpp (and SmolLM2's own tokenizer.json, which has a Digits pre-tokenizer)
// also isolate every \p{N} before the GPT-2 regex; transformers' GGUF conversion does not, and ids
// follow transformers here, so "  42" or non-ASCII digits can tokenize differently from
// llama.cpp. ASCII digit runs after a letter or at the start come out the same, because SmolLM2's
// merges never join two digits.
#pragma once

#include <string_view>
#include <vector>

namespace kvaudit::model {

inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen35SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kTekkenSplitPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kGpt4oSplitPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct GgufPreTokenizer {
  std::string_view name;
  // Empty: GPT-2's ByteLevel(use_regex=true). Otherwise Split(pattern, Isolated) followed by
  // ByteLevel(use_regex=false).
  std::string_view split_pattern;
};

// Every accepted tokenizer.ggml.pre name, in a fixed order.
const std::vector<GgufPreTokenizer>& gguf_pre_tokenizers();

}  // namespace kvaudit::model

// LongBench's middle truncation (THUDM/LongBench @ 2e00731f8d0b, LongBench/pred.py, get_pred):
//
//   ids = tokenizer(prompt, truncation=False).input_ids          # add_special_tokens=True: BOS
//   counts if len(ids) > max_length:
//       half = int(max_length / 2)
//       prompt = tokenizer.decode(ids[:half], skip_special_tokens=True) +
//                tokenizer.decode(ids[-half:], skip_special_tokens=True)
//
// The head and tail halves are decoded separately and the strings concatenated, so the result,
// re-tokenized, can differ from 2·half tokens by a few at the seam (recorded by the caller).
// max_length comes from the caller (pred.py: config/model2maxlen.json, window − ~500); it must be
// at least 2, since Python's ids[-0:] would keep the whole prompt when half is 0.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "runners/model/tokenizer/tokenizer.h"

namespace kvaudit::benchmarks {

struct MiddleTruncation {
  std::string text;                       // the prompt after truncation (the input when it fits)
  std::size_t original_tokens = 0;        // len(tokenizer(prompt).input_ids)
  bool truncated = false;                 // original_tokens > max_length
  std::size_t kept_tokens_each_side = 0;  // half, when truncated; 0 otherwise
};

// Throws std::invalid_argument when max_length < 2; model::ModelInputError from the tokenizer.
MiddleTruncation middle_truncate(std::string_view prompt, const model::Tokenizer& tokenizer,
                                 std::size_t max_length);

}  // namespace kvaudit::benchmarks

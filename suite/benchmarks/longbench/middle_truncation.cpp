// LongBench's middle truncation by tokens (see middle_truncation.h for pred.py's rule).
#include "suite/benchmarks/longbench/middle_truncation.h"

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

namespace kvaudit::benchmarks {

MiddleTruncation middle_truncate(std::string_view prompt, const model::Tokenizer& tokenizer,
                                 std::size_t max_length) {
  if (max_length < 2) {
    throw std::invalid_argument("middle_truncate: max_length must be at least 2, got " +
                                std::to_string(max_length));
  }
  const std::vector<std::int32_t> ids =
      tokenizer.encode(prompt, {.add_special_tokens = true, .parse_special = true});
  MiddleTruncation out;
  out.original_tokens = ids.size();
  if (ids.size() <= max_length) {
    out.text = std::string(prompt);
    return out;
  }
  const std::size_t half = max_length / 2;  // int(max_length / 2)
  const std::span<const std::int32_t> all(ids);
  out.text = tokenizer.decode(all.first(half), true) + tokenizer.decode(all.last(half), true);
  out.truncated = true;
  out.kept_tokens_each_side = half;
  return out;
}

}  // namespace kvaudit::benchmarks

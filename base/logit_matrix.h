// LogitMatrix: rows of next-token logits returned by an inference engine (either device), and
// LogitRows, which rows of a prefill get them.
//
// values is row-major [rows, vocab] in f32. When a model computes in bf16 every value is
// bf16-representable (HF keeps bf16 logits; docs/design/numerics.md); in f32 they are plain f32.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace kvaudit {

// Which positions of a prefill get logits: none (fill the cache only), the last token, or all.
enum class LogitRows { none, last, all };

struct LogitMatrix {
  int rows = 0;
  int vocab = 0;
  std::vector<float> values;  // [rows, vocab]

  std::span<const float> row(int r) const {
    return std::span<const float>(values).subspan(static_cast<std::size_t>(r) * vocab, vocab);
  }
};

}  // namespace kvaudit

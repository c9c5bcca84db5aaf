// LogitMatrix: rows of next-token logits returned by the CPU backend.
//
// values is row-major [rows, vocab] in f32. In bf16 mode every value is bf16-representable (HF
// keeps bf16 logits, reference/inference-anchors.md §2.2); in f32 mode they are plain f32.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace kvaudit::cpu {

struct LogitMatrix {
  int rows = 0;
  int vocab = 0;
  std::vector<float> values;  // [rows, vocab]

  std::span<const float> row(int r) const {
    return std::span<const float>(values).subspan(static_cast<std::size_t>(r) * vocab, vocab);
  }
};

}  // namespace kvaudit::cpu

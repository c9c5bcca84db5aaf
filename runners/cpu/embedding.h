// Token embedding lookup (HF nn.Embedding): out[t] = table[tokens[t]]. No rounding is needed: in
// bf16 mode the table already holds bf16 values (the lookup is exact).
#pragma once

#include <cstdint>
#include <span>

namespace kvaudit::cpu {

// table [vocab, hidden], tokens [T] → out [T, hidden]. Throws std::invalid_argument naming the
// index and the id when a token id is outside [0, vocab).
void embed_tokens(std::span<const float> table, int vocab, int hidden,
                  std::span<const std::int32_t> tokens, std::span<float> out);

}  // namespace kvaudit::cpu

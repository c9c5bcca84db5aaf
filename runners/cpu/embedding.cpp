// Token embedding lookup; see embedding.h.
#include "runners/cpu/embedding.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "runners/cpu/shape_check.h"

namespace kvaudit::cpu {

void embed_tokens(std::span<const float> table, int vocab, int hidden,
                  std::span<const std::int32_t> tokens, std::span<float> out) {
  require_size(table, static_cast<std::size_t>(vocab) * hidden, "embed_tokens: table");
  require_size(out, tokens.size() * hidden, "embed_tokens: out");
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::int32_t id = tokens[t];
    if (id < 0 || id >= vocab) {
      throw std::invalid_argument("token id " + std::to_string(id) + " at index " +
                                  std::to_string(t) + " is outside the vocabulary [0, " +
                                  std::to_string(vocab) + ")");
    }
    const auto row = table.subspan(static_cast<std::size_t>(id) * hidden, hidden);
    std::copy(row.begin(), row.end(), out.begin() + static_cast<std::ptrdiff_t>(t * hidden));
  }
}

}  // namespace kvaudit::cpu

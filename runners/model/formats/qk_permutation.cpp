// GGUF llama-arch Q/K row (un)permutation; see qk_permutation.h for the formulas and sources.
#include "runners/model/formats/qk_permutation.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kvaudit::model {

namespace {

// For head h (size D), pair index i in [0, D/2) and parity p in {0, 1}: interleaved row
// h*D + 2*i + p <-> rotate-half row h*D + p*D/2 + i. Rows are moved whole (cols values each).
void permute_rows(std::vector<float>& matrix, std::size_t rows, std::size_t cols,
                  std::size_t n_head, bool to_rotate_half) {
  if (n_head == 0 || rows % (2 * n_head) != 0 || matrix.size() != rows * cols)
    throw std::invalid_argument("Q/K permutation: " + std::to_string(rows) + " rows x " +
                                std::to_string(cols) + " cols (" + std::to_string(matrix.size()) +
                                " values) cannot be split into " + std::to_string(n_head) +
                                " heads of even size");
  const std::size_t head_dim = rows / n_head;
  const std::size_t half = head_dim / 2;
  std::vector<float> result(matrix.size());
  for (std::size_t h = 0; h < n_head; ++h)
    for (std::size_t i = 0; i < half; ++i)
      for (std::size_t p = 0; p < 2; ++p) {
        const std::size_t interleaved = h * head_dim + 2 * i + p;
        const std::size_t rotate_half = h * head_dim + p * half + i;
        const std::size_t dst = to_rotate_half ? rotate_half : interleaved;
        const std::size_t src = to_rotate_half ? interleaved : rotate_half;
        std::copy_n(matrix.begin() + static_cast<std::ptrdiff_t>(src * cols), cols,
                    result.begin() + static_cast<std::ptrdiff_t>(dst * cols));
      }
  matrix = std::move(result);
}

}  // namespace

void reverse_gguf_qk_permutation(std::vector<float>& matrix, std::size_t rows, std::size_t cols,
                                 std::size_t n_head) {
  permute_rows(matrix, rows, cols, n_head, /*to_rotate_half=*/true);
}

void apply_gguf_qk_permutation(std::vector<float>& matrix, std::size_t rows, std::size_t cols,
                               std::size_t n_head) {
  permute_rows(matrix, rows, cols, n_head, /*to_rotate_half=*/false);
}

}  // namespace kvaudit::model

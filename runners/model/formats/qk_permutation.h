// The Q/K row permutation of llama-arch GGUF files. llama.cpp's convert_hf_to_gguf.py
// (`LlamaModel.permute`) reorders each head's rows of q_proj/k_proj from HF rotate-half (NeoX)
// RoPE order to interleaved order, because llama.cpp runs interleaved RoPE for `llama`:
//   permute(w, n_head):  w.reshape(n_head, 2, rows/n_head/2, *rest).swapaxes(1, 2).reshape(w.shape)
// transformers undoes it when loading a GGUF (`modeling_gguf_pytorch_utils.py`, reverse_permute):
//   reverse_permute(w, n_head): w.reshape(n_head, rows/n_head/2, 2, *rest).swapaxes(1,
//   2).reshape(w.shape)
// i.e. within each head of size D, GGUF row h*D + 2*i + p goes to HF row h*D + p*D/2 + i.
// `n_head` is num_heads for Q and num_kv_heads for K. Qwen2 GGUFs are not permuted (NeoX RoPE).
#pragma once

#include <cstddef>
#include <vector>

namespace kvaudit::model {

// Undoes the permutation in place on a row-major [rows, cols] matrix (cols = 1 for a bias).
// Requires rows % (2 * n_head) == 0 (ModelInputError otherwise is not thrown: callers validate
// shapes first; a violation throws std::invalid_argument).
void reverse_gguf_qk_permutation(std::vector<float>& matrix, std::size_t rows, std::size_t cols,
                                 std::size_t n_head);

// The forward permutation (what convert_hf_to_gguf.py applies); used by tests.
void apply_gguf_qk_permutation(std::vector<float>& matrix, std::size_t rows, std::size_t cols,
                               std::size_t n_head);

}  // namespace kvaudit::model

// The GGUF llama Q/K row permutation: reverse(apply(x)) == x, and the explicit row mapping of
// transformers' reverse_permute for one head of size 8 (GGUF row 2i+p -> HF row p*4+i).
// End-to-end agreement with transformers' GGUF loader is in load_weights_test.cpp.
#include "runners/model/formats/qk_permutation.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

namespace kvaudit::model {
namespace {

TEST(QkPermutation, ReverseMapsInterleavedRowsToRotateHalf) {
  // One head, head_dim 8, 1 column: GGUF rows hold the HF rows 0,4,1,5,2,6,3,7.
  std::vector<float> gguf{0, 4, 1, 5, 2, 6, 3, 7};
  reverse_gguf_qk_permutation(gguf, 8, 1, 1);
  EXPECT_EQ(gguf, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(QkPermutation, RoundTripWithSeveralHeadsAndColumns) {
  std::vector<float> original(3 * 8 * 5);  // 3 heads x head_dim 8, 5 columns
  std::iota(original.begin(), original.end(), 0.0f);
  std::vector<float> matrix = original;
  apply_gguf_qk_permutation(matrix, 24, 5, 3);
  EXPECT_NE(matrix, original);
  // Columns move with their row: row 1 of head 0 in GGUF order is HF row 4.
  EXPECT_EQ(matrix[1 * 5 + 2], original[4 * 5 + 2]);
  reverse_gguf_qk_permutation(matrix, 24, 5, 3);
  EXPECT_EQ(matrix, original);
}

TEST(QkPermutation, RowsMustSplitIntoEvenHeads) {
  std::vector<float> matrix(6);
  EXPECT_THROW(reverse_gguf_qk_permutation(matrix, 6, 1, 2), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::model

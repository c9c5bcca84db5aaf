// The ragged per-head decode test: after a prefill, every (layer, KV head) keeps a different random
// subset of the context; the question and decode steps on top of the compacted caches must give the
// logits of an independent dense reference (reference_forward.h) in which the evicted entries are
// masked out, for both attention backends (f32, ≤ 1e-5 relative to the largest logit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "tests/cpu_runtime/compare.h"
#include "tests/cpu_runtime/random_model.h"
#include "tests/cpu_runtime/reference_forward.h"

namespace kvaudit::cpu {
namespace {

using testing::make_random_model;
using testing::max_relative_error;
using testing::random_tokens;
using testing::RandomModelSpec;

// kept[layer][kv_head] = ascending context positions that head keeps.
using KeptSets = std::vector<std::vector<std::vector<std::int32_t>>>;

KeptSets random_kept_sets(int layers, int kv_heads, int context, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  KeptSets kept(layers, std::vector<std::vector<std::int32_t>>(kv_heads));
  for (auto& layer : kept) {
    for (auto& head : layer) {
      // Each head its own budget (between 1 and context − 1) and its own positions.
      std::uniform_int_distribution<int> budget(1, context - 1);
      std::vector<std::int32_t> all(context);
      for (int p = 0; p < context; ++p) all[p] = p;
      std::shuffle(all.begin(), all.end(), engine);
      head.assign(all.begin(), all.begin() + budget(engine));
      std::sort(head.begin(), head.end());
    }
  }
  return kept;
}

void evict(SequenceState& state, const KeptSets& kept) {
  for (std::size_t l = 0; l < kept.size(); ++l)
    for (std::size_t h = 0; h < kept[l].size(); ++h)
      state.kv_cache().retain(static_cast<int>(l), static_cast<int>(h), kept[l][h]);
}

// The reference sees every token; new tokens (position ≥ context) see only kept context entries.
testing::KeyFilter mask_evicted(const KeptSets& kept, int context) {
  return [&kept, context](int layer, int kv_head, int query, int key) {
    if (query < context || key >= context) return true;
    const auto& keep = kept[layer][kv_head];
    return std::binary_search(keep.begin(), keep.end(), key);
  };
}

std::vector<float> flat_row(const std::vector<std::vector<double>>& ref, std::size_t r) {
  return std::vector<float>(ref[r].begin(), ref[r].end());
}

TEST(RaggedDecodeTest, LogitsEqualTheMaskedDenseReference) {
  RandomModelSpec spec;
  spec.num_layers = 3;
  spec.num_heads = 6;
  spec.num_kv_heads = 3;
  spec.head_dim = 8;
  spec.attention_bias = true;
  const model::ModelWeights weights = make_random_model(spec);
  const int context = 48;
  const std::vector<std::int32_t> tokens = random_tokens(context + 6 + 3, spec.vocab_size, 31);
  const std::span<const std::int32_t> all(tokens);
  const KeptSets kept = random_kept_sets(spec.num_layers, spec.num_kv_heads, context, 32);
  // The sets really are ragged: more than one distinct size.
  std::set<std::size_t> sizes;
  for (const auto& layer : kept)
    for (const auto& head : layer) sizes.insert(head.size());
  ASSERT_GT(sizes.size(), 1u);
  const auto reference = testing::reference_logits(weights, tokens, mask_evicted(kept, context));
  // Sanity: the mask matters (the unmasked reference differs at the first new token).
  const auto unmasked = testing::reference_logits(weights, all.first(context + 1));
  ASSERT_GT(max_relative_error(flat_row(unmasked, context), reference[context]), 1e-3);

  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend, {.eager_query_chunk = 4, .sdpa_key_block = 5});
    SequenceState state = model.new_sequence();
    model.prefill(state, all.first(context), LogitRows::none);
    const std::size_t bytes_before = state.kv_cache().kept_bytes();
    evict(state, kept);
    EXPECT_LT(state.kv_cache().kept_bytes(), bytes_before);
    EXPECT_EQ(state.original_length(), context);
    // Question: 6 tokens on top of the compacted cache, positions continuing at 48.
    const LogitMatrix question = model.prefill(state, all.subspan(context, 6), LogitRows::all);
    for (int t = 0; t < 6; ++t) {
      EXPECT_LE(
          max_relative_error(question.row(t), std::span<const double>(reference[context + t])),
          1e-5)
          << (backend == AttentionBackend::eager ? "eager" : "sdpa") << " question row " << t;
    }
    // Three decode steps.
    for (int step = 0; step < 3; ++step) {
      SequenceState* batch[] = {&state};
      const std::size_t index = static_cast<std::size_t>(context + 6 + step);
      const LogitMatrix logits = model.decode_step(batch, all.subspan(index, 1));
      EXPECT_LE(max_relative_error(logits.row(0), std::span<const double>(reference[index])), 1e-5)
          << (backend == AttentionBackend::eager ? "eager" : "sdpa") << " decode step " << step;
    }
    EXPECT_EQ(state.original_length(), context + 9);
  }
}

TEST(RaggedDecodeTest, CopiesWithDifferentEvictionsDecodeTogether) {
  RandomModelSpec spec;
  spec.num_heads = 4;
  spec.num_kv_heads = 2;
  const model::ModelWeights weights = make_random_model(spec);
  const int context = 30;
  const std::vector<std::int32_t> tokens = random_tokens(context + 2, spec.vocab_size, 33);
  const std::span<const std::int32_t> all(tokens);
  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend);
    SequenceState prefilled = model.new_sequence();
    model.prefill(prefilled, all.first(context), LogitRows::none);
    // Fan out: two copies of one prefill, each evicting differently, decoded in one batch.
    std::vector<KeptSets> kept = {random_kept_sets(2, 2, context, 34),
                                  random_kept_sets(2, 2, context, 35)};
    std::vector<SequenceState> cells = {prefilled, prefilled};
    for (int i = 0; i < 2; ++i) evict(cells[i], kept[i]);
    std::vector<SequenceState*> batch = {&cells[0], &cells[1]};
    for (int step = 0; step < 2; ++step) {
      const std::int32_t token = tokens[context + step];
      const std::vector<std::int32_t> both = {token, token};
      const LogitMatrix logits = model.decode_step(batch, both);
      for (int i = 0; i < 2; ++i) {
        const auto reference = testing::reference_logits(weights, all.first(context + step + 1),
                                                         mask_evicted(kept[i], context));
        EXPECT_LE(
            max_relative_error(logits.row(i), std::span<const double>(reference[context + step])),
            1e-5)
            << "cell " << i << " step " << step;
      }
    }
    // The prefilled original is untouched by its copies' evictions.
    EXPECT_EQ(prefilled.kv_cache().kept_count(0, 0), static_cast<std::size_t>(context));
  }
}

}  // namespace
}  // namespace kvaudit::cpu

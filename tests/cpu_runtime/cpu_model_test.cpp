// Tests of CpuModel's forward on random tiny decoders: logits vs the double reference forward,
// split prefill == whole prefill, prefill + decode == longer prefill, batched == one-by-one, bf16
// mode, the PrefillObserver views, error handling (state unchanged), weight validation.
#include "runners/cpu/cpu_model.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runners/cpu/rope.h"
#include "runners/model/model_error.h"
#include "runners/model/rope_tables.h"
#include "tests/cpu_runtime/compare.h"
#include "tests/cpu_runtime/random_model.h"
#include "tests/cpu_runtime/reference_forward.h"

namespace kvaudit::cpu {
namespace {

using testing::all_bf16_representable;
using testing::make_random_model;
using testing::max_relative_error;
using testing::random_tokens;
using testing::RandomModelSpec;

const char* name(AttentionBackend b) { return b == AttentionBackend::eager ? "eager" : "sdpa"; }

// Rows [first, first + count) of a [T][vocab] reference, flattened.
std::vector<double> reference_rows(const std::vector<std::vector<double>>& ref, std::size_t first,
                                   std::size_t count) {
  std::vector<double> out;
  for (std::size_t r = first; r < first + count; ++r)
    out.insert(out.end(), ref[r].begin(), ref[r].end());
  return out;
}

struct SpecCase {
  const char* label;
  RandomModelSpec spec;
};

std::vector<SpecCase> f32_specs() {
  RandomModelSpec llama;
  RandomModelSpec qwen;  // q/k/v bias, tied embeddings, GQA 3:1
  qwen.attention_bias = true;
  qwen.tie_word_embeddings = true;
  qwen.num_heads = 6;
  qwen.num_kv_heads = 2;
  qwen.head_dim = 8;
  qwen.seed = 2;
  RandomModelSpec llama3;  // llama3 RoPE scaling, MHA
  llama3.llama3_rope = true;
  llama3.num_heads = 3;
  llama3.num_kv_heads = 3;
  llama3.head_dim = 16;
  llama3.seed = 3;
  return {{"llama", llama}, {"qwen_bias_tied", qwen}, {"llama3_rope", llama3}};
}

TEST(CpuModelTest, PrefillLogitsMatchTheDoubleReference) {
  for (const SpecCase& c : f32_specs()) {
    const model::ModelWeights weights = make_random_model(c.spec);
    const std::vector<std::int32_t> tokens = random_tokens(70, c.spec.vocab_size, 11);
    const auto reference = testing::reference_logits(weights, tokens);
    for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
      CpuModel model(weights, backend, {.eager_query_chunk = 16, .sdpa_key_block = 8});
      SequenceState state = model.new_sequence();
      const LogitMatrix logits = model.prefill(state, tokens, LogitRows::all);
      ASSERT_EQ(logits.rows, 70);
      EXPECT_LE(max_relative_error(logits.values, reference_rows(reference, 0, 70)), 1e-5)
          << c.label << " " << name(backend);
      EXPECT_EQ(state.original_length(), 70);
    }
  }
}

TEST(CpuModelTest, SplitPrefillEqualsWholePrefill) {
  const RandomModelSpec spec;
  const model::ModelWeights weights = make_random_model(spec);
  const std::vector<std::int32_t> tokens = random_tokens(45, spec.vocab_size, 12);
  const std::span<const std::int32_t> all(tokens);
  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend);
    SequenceState whole = model.new_sequence();
    const LogitMatrix whole_logits = model.prefill(whole, all, LogitRows::all);
    SequenceState split = model.new_sequence();
    const LogitMatrix context = model.prefill(split, all.first(30), LogitRows::all);
    const LogitMatrix question = model.prefill(split, all.subspan(30), LogitRows::all);
    ASSERT_EQ(context.rows + question.rows, 45);
    std::vector<float> joined = context.values;
    joined.insert(joined.end(), question.values.begin(), question.values.end());
    EXPECT_LE(max_relative_error(joined, whole_logits.values), 1e-6) << name(backend);
    // The caches hold the same entries.
    const KvHeadView a = whole.kv_cache().head(1, 1), b = split.kv_cache().head(1, 1);
    EXPECT_EQ(std::vector<std::int32_t>(a.positions.begin(), a.positions.end()),
              std::vector<std::int32_t>(b.positions.begin(), b.positions.end()));
    EXPECT_LE(max_relative_error(std::vector<float>(b.keys.begin(), b.keys.end()),
                                 std::vector<float>(a.keys.begin(), a.keys.end())),
              1e-6);
  }
}

TEST(CpuModelTest, PrefillThenDecodeEqualsTheLongerPrefill) {
  const RandomModelSpec spec;
  const model::ModelWeights weights = make_random_model(spec);
  const std::vector<std::int32_t> tokens = random_tokens(33, spec.vocab_size, 13);
  const std::span<const std::int32_t> all(tokens);
  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend);
    SequenceState full = model.new_sequence();
    const LogitMatrix last = model.prefill(full, all, LogitRows::last);
    ASSERT_EQ(last.rows, 1);
    SequenceState stepwise = model.new_sequence();
    const LogitMatrix none = model.prefill(stepwise, all.first(32), LogitRows::none);
    EXPECT_EQ(none.rows, 0);
    SequenceState* batch[] = {&stepwise};
    const LogitMatrix decoded = model.decode_step(batch, all.subspan(32, 1));
    ASSERT_EQ(decoded.rows, 1);
    EXPECT_LE(max_relative_error(decoded.values, last.values), 1e-6) << name(backend);
    EXPECT_EQ(stepwise.original_length(), 33);
  }
}

TEST(CpuModelTest, BatchedDecodeAndPrefillEqualOneByOne) {
  RandomModelSpec spec;
  spec.attention_bias = true;
  const model::ModelWeights weights = make_random_model(spec);
  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend);
    std::vector<SequenceState> batched, single;
    for (int i = 0; i < 4; ++i) {
      const std::vector<std::int32_t> prompt = random_tokens(10 + 7 * i, spec.vocab_size, 20 + i);
      for (auto* states : {&batched, &single}) {
        states->push_back(model.new_sequence());
        model.prefill(states->back(), prompt, LogitRows::none);
      }
    }
    for (int step = 0; step < 3; ++step) {
      const std::vector<std::int32_t> next = random_tokens(4, spec.vocab_size, 40 + step);
      std::vector<SequenceState*> pointers;
      for (auto& s : batched) pointers.push_back(&s);
      const LogitMatrix together = model.decode_step(pointers, next);
      ASSERT_EQ(together.rows, 4);
      for (int i = 0; i < 4; ++i) {
        SequenceState* one[] = {&single[i]};
        const LogitMatrix alone = model.decode_step(one, std::span(next).subspan(i, 1));
        EXPECT_LE(
            max_relative_error(std::vector<float>(together.row(i).begin(), together.row(i).end()),
                               alone.values),
            1e-6)
            << name(backend) << " step " << step << " sequence " << i;
      }
    }
    // prefill_batch with sequences of different lengths equals separate prefills.
    const std::vector<std::int32_t> a = random_tokens(5, spec.vocab_size, 50);
    const std::vector<std::int32_t> b = random_tokens(9, spec.vocab_size, 51);
    std::vector<SequenceState*> pointers = {&batched[0], &batched[1]};
    const std::span<const std::int32_t> lists[] = {a, b};
    const std::vector<LogitMatrix> both = model.prefill_batch(pointers, lists, LogitRows::all);
    const LogitMatrix alone_a = model.prefill(single[0], a, LogitRows::all);
    const LogitMatrix alone_b = model.prefill(single[1], b, LogitRows::all);
    EXPECT_LE(max_relative_error(both[0].values, alone_a.values), 1e-6);
    EXPECT_LE(max_relative_error(both[1].values, alone_b.values), 1e-6);
  }
}

TEST(CpuModelTest, LogitsDoNotDependOnTheThreadCount) {
  RandomModelSpec spec;
  spec.hidden_size = 128;  // large enough for the GEMMs to be split over threads
  spec.intermediate_size = 512;
  spec.vocab_size = 700;
  spec.dtype = model::ComputeDtype::bf16;
  const model::ModelWeights weights = make_random_model(spec);
  const std::vector<std::int32_t> tokens = random_tokens(150, spec.vocab_size, 19);
  const int saved = omp_get_max_threads();
  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend);
    std::vector<std::vector<float>> results;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      SequenceState state = model.new_sequence();
      results.push_back(model.prefill(state, tokens, LogitRows::all).values);
    }
    EXPECT_EQ(results[1], results[0]) << name(backend);
    EXPECT_EQ(results[2], results[0]) << name(backend);
  }
  omp_set_num_threads(saved);
}

TEST(CpuModelTest, Bf16ModeRoundsLogitsAndStaysCloseToTheReference) {
  RandomModelSpec spec;
  spec.dtype = model::ComputeDtype::bf16;
  const model::ModelWeights weights = make_random_model(spec);
  const std::vector<std::int32_t> tokens = random_tokens(40, spec.vocab_size, 14);
  const auto reference = testing::reference_logits(weights, tokens);
  std::vector<LogitMatrix> results;
  for (AttentionBackend backend : {AttentionBackend::eager, AttentionBackend::sdpa}) {
    CpuModel model(weights, backend);
    EXPECT_EQ(model.rounding(), Rounding::bf16);
    SequenceState state = model.new_sequence();
    results.push_back(model.prefill(state, tokens, LogitRows::all));
    EXPECT_TRUE(all_bf16_representable(results.back().values)) << name(backend);
    EXPECT_LE(max_relative_error(results.back().values, reference_rows(reference, 0, 40)), 5e-2)
        << name(backend);
    EXPECT_EQ(state.kv_cache().kept_bytes(), 40u * 2u * 2u * 2u * 12u * 2u);  // bf16: 2 bytes
    EXPECT_TRUE(all_bf16_representable(state.kv_cache().head(1, 0).keys));
    EXPECT_TRUE(all_bf16_representable(state.kv_cache().head(1, 1).values));
  }
  // Distinct numerics: the backends do not give bit-identical bf16 logits.
  EXPECT_NE(results[0].values, results[1].values);
}

// Records every view it is shown.
class RecordingObserver : public PrefillObserver {
 public:
  explicit RecordingObserver(bool wants_pre_rope) : pre_rope_(wants_pre_rope) {}
  bool wants_pre_rope_queries() const override { return pre_rope_; }
  void on_layer(const PrefillLayerView& view) override {
    layers.push_back(view.layer);
    positions.assign(view.positions.begin(), view.positions.end());
    pre_rope.emplace_back(view.queries_pre_rope.begin(), view.queries_pre_rope.end());
    queries.emplace_back(view.queries.begin(), view.queries.end());
    keys.emplace_back(view.keys.begin(), view.keys.end());
    values.emplace_back(view.values.begin(), view.values.end());
    num_tokens = view.num_tokens;
  }
  std::vector<int> layers;
  std::vector<std::int32_t> positions;
  std::vector<std::vector<float>> pre_rope, queries, keys, values;
  int num_tokens = 0;

 private:
  bool pre_rope_;
};

// sdpa_decode_one_block (the CUDA decode kernel's order, for its CPU twin): decode steps take all
// held keys as one block, prefill keeps sdpa_key_block. With a prompt of at most one block, a model
// with 32-key blocks and the option equals, bit for bit, a model whose blocks hold every key, in
// prefill and in every decode step past 32 keys; without the option the bf16 rounding of p per
// block gives other logits.
TEST(CpuModelTest, SdpaDecodeOneBlockTakesEveryKeyAsOneBlockInDecodeOnly) {
  RandomModelSpec spec;
  spec.dtype = model::ComputeDtype::bf16;
  const model::ModelWeights weights = make_random_model(spec);
  const std::vector<std::int32_t> tokens = random_tokens(110, spec.vocab_size, 21);
  CpuModel twin(weights, AttentionBackend::sdpa,
                {.sdpa_key_block = 32, .sdpa_decode_one_block = true});
  CpuModel one_block(weights, AttentionBackend::sdpa, {.sdpa_key_block = 4096});
  CpuModel blocked(weights, AttentionBackend::sdpa, {.sdpa_key_block = 32});
  SequenceState a = twin.new_sequence(), b = one_block.new_sequence(), c = blocked.new_sequence();
  const std::span<const std::int32_t> all(tokens);
  EXPECT_EQ(twin.prefill(a, all.first(30), LogitRows::all).values,
            one_block.prefill(b, all.first(30), LogitRows::all).values);
  (void)blocked.prefill(c, all.first(30), LogitRows::none);
  bool blocked_differs = false;
  for (std::size_t t = 30; t < tokens.size(); ++t) {
    SequenceState* sa[] = {&a};
    SequenceState* sb[] = {&b};
    SequenceState* sc[] = {&c};
    const LogitMatrix x = twin.decode_step(sa, all.subspan(t, 1));
    const LogitMatrix y = one_block.decode_step(sb, all.subspan(t, 1));
    ASSERT_EQ(x.values, y.values) << "decode step at position " << t;
    blocked_differs =
        blocked_differs || blocked.decode_step(sc, all.subspan(t, 1)).values != x.values;
  }
  EXPECT_TRUE(blocked_differs) << "80 decode steps past 32 keys gave the blocked model's logits";
}

TEST(CpuModelTest, ObserverSeesEachLayersQueriesKeysAndValues) {
  const RandomModelSpec spec;
  const model::ModelWeights weights = make_random_model(spec);
  CpuModel model(weights, AttentionBackend::sdpa);
  const std::vector<std::int32_t> context = random_tokens(12, spec.vocab_size, 15);
  const std::vector<std::int32_t> question = random_tokens(5, spec.vocab_size, 16);
  SequenceState state = model.new_sequence();
  RecordingObserver without(false);
  model.prefill(state, context, LogitRows::none, &without);
  EXPECT_EQ(without.layers, (std::vector<int>{0, 1}));
  EXPECT_TRUE(without.pre_rope[0].empty()) << "pre-RoPE queries must not be copied unless asked";

  RecordingObserver with(true);
  model.prefill(state, question, LogitRows::none, &with);
  EXPECT_EQ(with.num_tokens, 5);
  EXPECT_EQ(with.positions, (std::vector<std::int32_t>{12, 13, 14, 15, 16}));
  const int d = spec.head_dim, heads = spec.num_heads, kv_heads = spec.num_kv_heads;
  for (int layer = 0; layer < 2; ++layer) {
    ASSERT_EQ(with.pre_rope[layer].size(), 5u * heads * d);
    // Rotating the pre-RoPE queries gives the post-RoPE ones.
    std::vector<float> rotated = with.pre_rope[layer];
    std::vector<float> cos(5 * d), sin(5 * d);
    model::rope_cos_sin(model.rope_inv_freq(), with.positions, Rounding::none, cos, sin);
    apply_rope(rotated, heads, d, cos, sin, Rounding::none);
    EXPECT_EQ(rotated, with.queries[layer]);
    EXPECT_NE(with.pre_rope[layer], with.queries[layer]);
    // The keys and values are what the cache holds for these positions.
    for (int h = 0; h < kv_heads; ++h) {
      const KvHeadView head = state.kv_cache().head(layer, h);
      ASSERT_EQ(head.size(), 17u);
      for (int t = 0; t < 5; ++t)
        for (int e = 0; e < d; ++e) {
          EXPECT_EQ(head.keys[(12 + t) * d + e], with.keys[layer][(t * kv_heads + h) * d + e]);
          EXPECT_EQ(head.values[(12 + t) * d + e], with.values[layer][(t * kv_heads + h) * d + e]);
        }
    }
  }
}

class ThrowingObserver : public PrefillObserver {
 public:
  void on_layer(const PrefillLayerView& view) override {
    if (view.layer == 1) throw std::runtime_error("observer failed");
  }
};

TEST(CpuModelTest, AFailedPrefillLeavesTheStateUnchanged) {
  const RandomModelSpec spec;
  const model::ModelWeights weights = make_random_model(spec);
  CpuModel model(weights, AttentionBackend::eager);
  const std::vector<std::int32_t> context = random_tokens(10, spec.vocab_size, 17);
  const std::vector<std::int32_t> more = random_tokens(4, spec.vocab_size, 18);
  SequenceState state = model.new_sequence();
  model.prefill(state, context, LogitRows::none);
  const std::vector<std::int32_t> bad = {1, spec.vocab_size};
  // An id outside the vocabulary is bad input (exit 1), not a bug (issue 16).
  EXPECT_THROW(model.prefill(state, bad, LogitRows::last), model::ModelInputError);
  ThrowingObserver thrower;
  EXPECT_THROW(model.prefill(state, more, LogitRows::last, &thrower), std::runtime_error);
  EXPECT_EQ(state.original_length(), 10);
  EXPECT_EQ(state.kv_cache().kept_count(0, 0), 10u);
  EXPECT_EQ(state.kv_cache().kept_count(1, 1), 10u);
  EXPECT_THROW(model.prefill(state, {}, LogitRows::last), std::invalid_argument);
  // It still continues exactly like a state that never saw the failures.
  SequenceState fresh = model.new_sequence();
  model.prefill(fresh, context, LogitRows::none);
  EXPECT_EQ(model.prefill(state, more, LogitRows::all).values,
            model.prefill(fresh, more, LogitRows::all).values);
  // Batch misuse.
  SequenceState* twice[] = {&state, &state};
  const std::vector<std::int32_t> two = {1, 2};
  EXPECT_THROW(model.decode_step(twice, two), std::invalid_argument);
  SequenceState* one[] = {&state};
  EXPECT_THROW(model.decode_step(one, two), std::invalid_argument);
}

TEST(CpuModelTest, RejectsInconsistentWeightsNamingSourceAndTensor) {
  model::ModelWeights weights = make_random_model(RandomModelSpec{});
  weights.layers[1].k_proj.pop_back();
  try {
    CpuModel model(weights, AttentionBackend::eager);
    FAIL() << "expected ModelInputError";
  } catch (const model::ModelInputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("random-test-model"), std::string::npos) << message;
    EXPECT_NE(message.find("model.layers.1.self_attn.k_proj.weight"), std::string::npos) << message;
  }
  model::ModelWeights untied = make_random_model(RandomModelSpec{});
  untied.lm_head.clear();
  EXPECT_THROW(CpuModel(untied, AttentionBackend::sdpa), model::ModelInputError);
  model::ModelWeights bad_gqa = make_random_model(RandomModelSpec{});
  bad_gqa.config.num_kv_heads = 3;
  EXPECT_THROW(CpuModel(bad_gqa, AttentionBackend::sdpa), model::ModelInputError);
  model::ModelWeights bad_rope = make_random_model(RandomModelSpec{});
  bad_rope.config.rope.theta = 0.0;
  EXPECT_THROW(CpuModel(bad_rope, AttentionBackend::sdpa), model::ModelInputError);
}

}  // namespace
}  // namespace kvaudit::cpu

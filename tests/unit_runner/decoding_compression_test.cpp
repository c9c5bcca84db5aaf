// Decode-time compression (runners/unit/decoding_compression.h) on the tiny golden models, with a
// recording method: the interval and buffer rules of kvpress DecodingPress, the bisection budget,
// the RoPE positions of the buffered queries, positions continuing past evictions, batched ==
// alone, and the refusal of an engine without observed decode steps. Parity with kvpress itself:
// tests/methods/kvpress_decoding_parity_test.cpp.
#include "runners/unit/decoding_compression.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/knorm.h"
#include "methods/method_factory.h"
#include "methods/scorer_method.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cpu/rope.h"
#include "runners/model/rope_tables.h"
#include "tests/unit_runner/core_only_engine.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::load_tiny_model;
using testing::random_tokens;

// Keeps the kvpress n_kept lowest indices (the oldest entries) and records every view it saw.
class RecordingMethod final : public methods::Method {
 public:
  struct Call {
    int layer = 0, length = 0, window_rows = 0;
    std::vector<float> window_queries;
    double compression = 0.0;
  };
  mutable std::vector<Call> calls;
  methods::Selection select(std::span<const methods::LayerCapture> layers,
                            const methods::Budget& budget,
                            const methods::SelectionContext&) const override {
    methods::Selection s;
    for (const auto& l : layers) {
      calls.push_back({l.layer, l.length, l.window_rows,
                       std::vector<float>(l.window_queries.begin(), l.window_queries.end()),
                       budget.compression});
      const auto n = methods::kept_count(l.length, budget.compression);
      std::vector<std::int32_t> first(static_cast<std::size_t>(n));
      for (std::int32_t i = 0; i < static_cast<std::int32_t>(n); ++i)
        first[static_cast<std::size_t>(i)] = i;
      s.kept.emplace_back(static_cast<std::size_t>(l.num_kv_heads), first);
    }
    return s;
  }
  std::string name() const override { return "recording"; }
};

struct Generation {
  std::vector<CompressingOutput> outputs;
  std::vector<std::unique_ptr<SequenceCache>> caches;
};

Generation run(InferenceEngine& engine, const std::vector<std::vector<std::int32_t>>& prompts,
               const std::vector<const methods::Method*>& methods, const DecodingPolicy& policy,
               int max_new_tokens) {
  Generation r;
  std::vector<LogitMatrix> logits;
  for (const auto& p : prompts) {
    r.caches.push_back(engine.new_cache(0));
    logits.push_back(engine.prefill(*r.caches.back(), p, LogitRows::last));
  }
  std::vector<CompressingSequence> sequences;
  for (std::size_t i = 0; i < prompts.size(); ++i)
    sequences.push_back({.cache = r.caches[i].get(),
                         .last_logits = logits[i].row(0),
                         .method = methods[i],
                         .policy = policy,
                         .context = {}});
  r.outputs = generate_greedy_compressing(engine, sequences,
                                          {.max_new_tokens = max_new_tokens, .eos_token_ids = {}},
                                          /*record_kept=*/true);
  return r;
}

TEST(DecodingCompression, RatioIsKvpressBisection) {
  // Values from kvpress 0.5.5 DecodingPress._find_target_compression_ratio (Python floats).
  EXPECT_EQ(decoding_compression_ratio(24, 24), 0.0);
  EXPECT_EQ(decoding_compression_ratio(10, 24), 0.0);
  EXPECT_DOUBLE_EQ(decoding_compression_ratio(44, 24), 0.4545454545454546);
  EXPECT_DOUBLE_EQ(decoding_compression_ratio(28, 24), 0.1428571428571429);
  EXPECT_DOUBLE_EQ(decoding_compression_ratio(100, 7), 0.9299999999999999);
  EXPECT_DOUBLE_EQ(decoding_compression_ratio(2049, 2048), 0.00048804294777937685);
  // The budget rule then keeps exactly the target for every length (checked 2..600 here; the
  // bisection lands for every k_len < 3000 in Python too).
  for (std::int64_t k = 2; k <= 600; ++k)
    for (std::int64_t t : {1, 7, 24, 300})
      if (k > t) {
        EXPECT_EQ(methods::kept_count(k, decoding_compression_ratio(k, t)), t) << k << " " << t;
      }
}

TEST(DecodingCompression, RatioTargetIsCompressionRatioDecodingPressRule) {
  // kvpress CompressionRatioDecodingPress._resolve_target_size: max(1, int(T·(1 − r))) with
  // Python floats (values computed by hand and checked in Python).
  const auto target = [](double r, std::int64_t seen) {
    return decoding_target_size({.target_size = 2048, .target_compression_ratio = r}, seen);
  };
  EXPECT_EQ(target(0.5, 44), 22);
  EXPECT_EQ(target(0.5, 45), 22);  // 22.5 truncated
  EXPECT_EQ(target(0.0, 37), 37);
  EXPECT_EQ(target(0.5, 1), 1);     // int(0.5) = 0, at least 1
  EXPECT_EQ(target(0.98, 41), 1);   // 0.82…
  EXPECT_EQ(target(0.98, 100), 2);  // 1 − 0.98 = 0.020000000000000018: 2.0000000000000018
  EXPECT_EQ(target(0.7, 10), 3);    // 3.0000000000000004
  EXPECT_EQ(target(0.8, 15), 2);    // 1 − 0.8 = 0.19999999999999996: 2.999999999999999, not 3
  EXPECT_EQ(target(0.3, 90), 62);   // 62.99999999999999, not 63
  // Without a ratio the target is target_size whatever was seen.
  EXPECT_EQ(decoding_target_size({.target_size = 24}, 1000), 24);
  EXPECT_EQ(decoding_target_size({.target_size = 24}, 3), 24);
}

TEST(DecodingCompression, ARatioTargetCountsEveryTokenSeenNotTheCacheLength) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const auto& c = model.config();
  RecordingMethod method;
  // Interval 3, ratio 0.5, 12-token prompt: compressions after decode steps 3, 6, 9 with
  // T = 15, 18, 21 tokens seen, targets int(T/2) = 7, 9, 10. The cache holds 15, 7 + 3 = 10 and
  // 9 + 3 = 12 entries then. The cache-length rule int(k_len/2) would give 7, 5, 6.
  const DecodingPolicy policy{.compression_interval = 3,
                              .target_size = 2048,
                              .hidden_states_buffer_size = 1,
                              .target_compression_ratio = 0.5};
  const auto prompt = random_tokens(12, c.vocab_size, 7);
  Generation r = run(model, {prompt}, {&method}, policy, 11);  // 10 decode steps
  const CompressingOutput& out = r.outputs.front();
  ASSERT_EQ(out.events.size(), 3u);
  EXPECT_EQ(out.compressions, 3);
  const int steps[] = {3, 6, 9}, targets[] = {7, 9, 10}, lengths[] = {15, 10, 12};
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(out.events[e].decode_step, steps[e]);
    EXPECT_EQ(out.events[e].original_length, 12 + steps[e]);
    EXPECT_EQ(out.events[e].target_size, targets[e]);
    for (const auto& layer : out.events[e].kept)
      for (const auto& head : layer) EXPECT_EQ(head.size(), static_cast<std::size_t>(targets[e]));
  }
  ASSERT_EQ(method.calls.size(), 3u * static_cast<std::size_t>(c.num_layers));
  for (std::size_t k = 0; k < method.calls.size(); ++k) {
    const std::size_t e = k / static_cast<std::size_t>(c.num_layers);
    EXPECT_EQ(method.calls[k].length, lengths[e]) << k;
    EXPECT_DOUBLE_EQ(method.calls[k].compression,
                     decoding_compression_ratio(lengths[e], targets[e]))
        << k;
  }
  EXPECT_EQ(r.caches.front()->kept_entries(),
            static_cast<std::size_t>(c.num_layers * c.num_kv_heads * (10 + 1)));
}

TEST(DecodingCompression, ATargetOfOneCompressesAtEveryStep) {
  // kvpress's trigger is `step count ≥ interval OR q_len ≥ target`; a decode step has q_len 1,
  // so a target of 1 (target_size 1, or a ratio whose target falls to 1) compresses every step.
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const auto prompt = random_tokens(12, model.config().vocab_size, 5);
  for (const DecodingPolicy& policy :
       {DecodingPolicy{.compression_interval = 4, .target_size = 1},
        DecodingPolicy{.compression_interval = 4, .target_compression_ratio = 0.95}}) {
    RecordingMethod method;
    Generation r = run(model, {prompt}, {&method}, policy, 6);  // 5 decode steps
    const CompressingOutput& out = r.outputs.front();
    ASSERT_EQ(out.events.size(), 5u);
    for (std::size_t e = 0; e < 5; ++e) {
      EXPECT_EQ(out.events[e].decode_step, static_cast<int>(e) + 1);
      EXPECT_EQ(out.events[e].target_size, 1);
      for (const auto& layer : out.events[e].kept)
        for (const auto& head : layer) EXPECT_EQ(head.size(), 1u);
    }
    // The first sees 12 + 1 entries, the later ones 1 + 1.
    EXPECT_EQ(method.calls.front().length, 13);
    EXPECT_EQ(method.calls.back().length, 2);
  }
}

TEST(DecodingCompression, AnObservedStepComputesWhatAPlainStepComputes) {
  const model::ModelWeights weights = load_tiny_model("qwen2", "bf16");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const auto& c = model.config();
  const auto prompt = random_tokens(9, c.vocab_size, 4);
  auto plain = model.new_cache(0);
  auto observed = model.new_cache(0);
  model.prefill(*plain, prompt, LogitRows::none);
  model.prefill(*observed, prompt, LogitRows::none);
  struct Counting final : DecodeObserver {
    std::vector<int> layers;
    std::vector<std::int32_t> positions;
    void on_layer(const DecodeLayerView& v) override {
      layers.push_back(v.layer);
      positions.assign(v.positions.begin(), v.positions.end());
      EXPECT_EQ(v.num_sequences, 1);
    }
  } counting;
  SequenceCache* const p[] = {plain.get()};
  SequenceCache* const o[] = {observed.get()};
  const std::int32_t token[] = {17};
  const LogitMatrix a = model.decode_step(p, token);
  const LogitMatrix b = model.decode_step_observed(o, token, counting);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(counting.layers.size(), static_cast<std::size_t>(c.num_layers));
  EXPECT_EQ(counting.positions, (std::vector<std::int32_t>{9}));
  EXPECT_EQ(observed->head_entries(0, 0).positions.size(), 10u);
  EXPECT_EQ(observed->head_entries(c.num_layers - 1, c.num_kv_heads - 1).positions.back(), 9);
}

TEST(DecodingCompression, IntervalBufferAndPositionsFollowDecodingPress) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const auto& c = model.config();
  RecordingMethod method;
  // Interval 3, target 10, buffer 1: compressions after decode steps 3, 6, 9 with
  // min(3, 1 + 1) = 2 buffered rows each.
  const DecodingPolicy policy{
      .compression_interval = 3, .target_size = 10, .hidden_states_buffer_size = 1};
  const auto prompt = random_tokens(12, c.vocab_size, 7);
  Generation r = run(model, {prompt}, {&method}, policy, 11);  // 10 decode steps
  const CompressingOutput& out = r.outputs.front();
  ASSERT_EQ(out.greedy.tokens.size(), 11u);
  ASSERT_EQ(out.events.size(), 3u);
  EXPECT_EQ(out.compressions, 3);
  const std::int64_t steps[] = {3, 6, 9};
  for (std::size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(out.events[e].decode_step, steps[e]);
    EXPECT_EQ(out.events[e].original_length, 12 + steps[e]);
    for (const auto& layer : out.events[e].kept)
      for (const auto& head : layer) EXPECT_EQ(head.size(), 10u);
  }
  // First compression: 15 entries (12 prompt + 3 decoded), keeps the 10 oldest = 0..9; the
  // second sees those 10 + positions 15..17 and keeps 0..9 again (positions keep counting).
  EXPECT_EQ(out.events[0].kept[0][0], (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  ASSERT_EQ(method.calls.size(), 3u * static_cast<std::size_t>(c.num_layers));
  // The first compression sees 12 + 3 entries, the later ones 10 + 3; each 2 buffered rows.
  for (std::size_t k = 0; k < method.calls.size(); ++k) {
    EXPECT_EQ(method.calls[k].length, k < static_cast<std::size_t>(c.num_layers) ? 15 : 13) << k;
    EXPECT_EQ(method.calls[k].window_rows, 2) << k;
  }
  EXPECT_DOUBLE_EQ(method.calls[0].compression, decoding_compression_ratio(15, 10));
  EXPECT_EQ(r.caches.front()->original_length(), 12 + 10);
  EXPECT_EQ(r.caches.front()->kept_entries(),
            static_cast<std::size_t>(c.num_layers * c.num_kv_heads * (10 + 1)));
  EXPECT_EQ(out.final_kept_bytes, r.caches.front()->kept_bytes());
  // Peak: 15 entries per head before the first compression, bytes = entries · 2 · d · 4.
  EXPECT_EQ(out.peak_kept_bytes,
            static_cast<std::size_t>(c.num_layers * c.num_kv_heads * 15 * 2 * c.head_dim * 4));
}

TEST(DecodingCompression, BufferedQueriesAreRotatedAtTheCompressingStepsPosition) {
  // kvpress applies the compressing step's position_embeddings to every buffered row; R-KV's
  // own rule keeps each row at its own position. The last row is the step's own query either
  // way; the earlier one differs, and rotating it back by the position gap maps one onto the other.
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const auto& c = model.config();
  const auto prompt = random_tokens(12, c.vocab_size, 11);
  RecordingMethod kvpress_rule, own_rule;
  DecodingPolicy policy{
      .compression_interval = 2, .target_size = 8, .hidden_states_buffer_size = 4};
  run(model, {prompt}, {&kvpress_rule}, policy, 3);
  policy.query_positions = BufferedQueryPositions::own;
  run(model, {prompt}, {&own_rule}, policy, 3);
  ASSERT_FALSE(kvpress_rule.calls.empty());
  ASSERT_EQ(kvpress_rule.calls.size(), own_rule.calls.size());
  const auto& a = kvpress_rule.calls.front();  // layer 0, decode step 2 (position 13)
  const auto& b = own_rule.calls.front();
  ASSERT_EQ(a.window_rows, 2);
  const std::size_t d = static_cast<std::size_t>(c.head_dim);
  // Head 0: row 1 (the step's token at position 13) equal; row 0 (position 12) not.
  for (std::size_t i = 0; i < d; ++i) EXPECT_EQ(a.window_queries[d + i], b.window_queries[d + i]);
  bool row0_differs = false;
  for (std::size_t i = 0; i < d; ++i) row0_differs |= a.window_queries[i] != b.window_queries[i];
  EXPECT_TRUE(row0_differs);
  // Rotating the own-position row 0 (position 12) by one more position gives the kvpress row.
  std::vector<float> row(b.window_queries.begin(),
                         b.window_queries.begin() + static_cast<std::ptrdiff_t>(d));
  std::vector<float> cos(d), sin(d);
  const std::int32_t one[] = {1};
  model::rope_cos_sin(model.rope_inv_freq(), one, model::Rounding::none, cos, sin);
  cpu::apply_rope(row, 1, c.head_dim, cos, sin, model::Rounding::none);
  for (std::size_t i = 0; i < d; ++i) EXPECT_NEAR(row[i], a.window_queries[i], 1e-5) << i;
}

TEST(DecodingCompression, BatchedSequencesGiveWhatEachGetsAlone) {
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const int vocab = model.config().vocab_size;
  const methods::ScorerMethod knorm(std::make_shared<methods::KnormScorer>());
  RecordingMethod oldest;
  const DecodingPolicy policy{.compression_interval = 4, .target_size = 20};
  const std::vector<std::vector<std::int32_t>> prompts = {random_tokens(30, vocab, 1),
                                                          random_tokens(22, vocab, 2)};
  Generation together = run(model, prompts, {&knorm, &oldest}, policy, 14);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const methods::Method* m = i == 0 ? static_cast<const methods::Method*>(&knorm) : &oldest;
    Generation alone = run(model, {prompts[i]}, {m}, policy, 14);
    const CompressingOutput& a = alone.outputs.front();
    const CompressingOutput& t = together.outputs[i];
    EXPECT_EQ(t.greedy.tokens, a.greedy.tokens) << i;
    ASSERT_EQ(t.events.size(), a.events.size()) << i;
    for (std::size_t e = 0; e < a.events.size(); ++e) EXPECT_EQ(t.events[e].kept, a.events[e].kept);
    EXPECT_EQ(t.final_kept_bytes, a.final_kept_bytes);
    EXPECT_EQ(t.peak_kept_bytes, a.peak_kept_bytes);
  }
  EXPECT_GT(together.outputs[0].compressions, 0);
}

TEST(DecodingCompression, RkvCompressesATraceKeepingItsWindow) {
  // R-KV as R-KV's code runs it: each buffered query at its own position, window 2 of the 4
  // steps since the last compression; every compression keeps the target and the window's two
  // newest positions in every head.
  const model::ModelWeights weights = load_tiny_model("qwen2", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const auto rkv = methods::make_method(methods::MethodConfig{
      "r", "rkv", "", {{"window", std::int64_t{2}}, {"kernel_size", std::int64_t{3}}}});
  const DecodingPolicy policy{.compression_interval = 4,
                              .target_size = 16,
                              .hidden_states_buffer_size = 8,
                              .query_positions = BufferedQueryPositions::own};
  Generation r =
      run(model, {random_tokens(24, model.config().vocab_size, 5)}, {rkv.get()}, policy, 13);
  const CompressingOutput& out = r.outputs.front();
  ASSERT_EQ(out.events.size(), 3u);
  EXPECT_EQ(out.compressions, 3);
  for (const CompressionEvent& e : out.events)
    for (const auto& layer : e.kept)
      for (const auto& head : layer) {
        ASSERT_EQ(head.size(), 16u);
        EXPECT_EQ(head[14], e.original_length - 2);
        EXPECT_EQ(head[15], e.original_length - 1);
      }
  EXPECT_LT(out.final_kept_bytes, out.peak_kept_bytes);
}

TEST(DecodingCompression, AnEngineWithoutObservedStepsRefusesNamingTheCpuDevice) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  testing::CoreOnlyEngine engine(model);
  RecordingMethod method;
  try {
    run(engine, {random_tokens(8, model.config().vocab_size, 3)}, {&method},
        {.compression_interval = 2, .target_size = 4}, 4);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
}

TEST(DecodingCompression, InvalidPoliciesAreRefusedNamingTheField) {
  for (const auto& [policy, field] : std::vector<std::pair<DecodingPolicy, std::string>>{
           {{.compression_interval = 0}, "compression_interval"},
           {{.target_size = 0}, "target_size"},
           {{.hidden_states_buffer_size = -1}, "hidden_states_buffer_size"},
           {{.target_compression_ratio = 1.0}, "target_compression_ratio"},
           {{.target_compression_ratio = -0.1}, "target_compression_ratio"},
           {{.target_compression_ratio = std::nan("")}, "target_compression_ratio"},
           {{.merge_budget = 2, .target_compression_ratio = 0.5}, "target_compression_ratio"}}) {
    try {
      validate(policy);
      FAIL() << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvaudit::unit

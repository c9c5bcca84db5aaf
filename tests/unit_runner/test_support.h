// Shared helpers of the unit runner's tests: the tiny golden models, deterministic token lists,
// and an observer that records a plain prefill's per-layer tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "runners/cpu/prefill_observer.h"
#include "runners/model/formats/load_weights.h"
#include "runners/unit/unit_runner.h"

namespace kvaudit::unit::testing {

// tests/golden/tiny_models/<family>/<dtype> (2 layers, 4 heads, 2 KV heads, head_dim 16, vocab
// 300).
inline model::ModelWeights load_tiny_model(const std::string& family, const std::string& dtype) {
  return model::load_model_weights(std::filesystem::path(KVAUDIT_TINY_MODELS_DIR) / family / dtype);
}

// `count` ids in [low, vocab), reproducible from `seed`.
inline std::vector<std::int32_t> random_tokens(int count, int vocab, std::uint32_t seed,
                                               int low = 3) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<std::int32_t> pick(low, vocab - 1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
  for (auto& id : ids) id = pick(engine);
  return ids;
}

// A unit of the tiny vocabulary: a 48-token context, a question (9 tokens unless said) and a
// 4-token suffix.
inline UnitTokens tiny_unit_tokens(int vocab, std::uint32_t seed, int question_tokens = 9) {
  UnitTokens t;
  t.context = random_tokens(48, vocab, seed);
  t.question = random_tokens(question_tokens, vocab, seed + 1);
  t.suffix = random_tokens(4, vocab, seed + 2);
  return t;
}

// The decoding tests' options: `max_new_tokens` greedy tokens, seed 19, kept sets returned, at
// most `max_batch_cells` cells decoded together (0: all).
inline UnitRunOptions decoding_test_options(int max_new_tokens, int max_batch_cells = 0) {
  UnitRunOptions options;
  options.decode.max_new_tokens = max_new_tokens;
  options.seed = 19;
  options.keep_selections = true;
  options.max_batch_cells = max_batch_cells;
  return options;
}

// A unit of the tiny vocabulary with a reconstruction prompt (KVzip's, RestoreKV's): arbitrary
// tokens, since the tiny models have no tokenizer, and a 3-token template head.
inline UnitTokens tiny_unit_with_pass_prompt(int vocab, std::uint32_t seed) {
  UnitTokens t = tiny_unit_tokens(vocab, seed, 10);
  t.pass_prompt.prefix_length = 3;
  t.pass_prompt.suffix = random_tokens(2, vocab, seed + 3);
  t.pass_prompt.repeat_first = random_tokens(7, vocab, seed + 4);
  t.pass_prompt.repeat_next = random_tokens(9, vocab, seed + 5);
  return t;
}

// Copies every layer's Q (pre- and post-RoPE), K and V of one prefill.
class RecordingObserver : public cpu::PrefillObserver {
 public:
  bool wants_pre_rope_queries() const override { return true; }
  void on_layer(const cpu::PrefillLayerView& view) override {
    num_tokens = view.num_tokens;
    pre_rope.emplace_back(view.queries_pre_rope.begin(), view.queries_pre_rope.end());
    queries.emplace_back(view.queries.begin(), view.queries.end());
    keys.emplace_back(view.keys.begin(), view.keys.end());
    values.emplace_back(view.values.begin(), view.values.end());
  }
  int num_tokens = 0;
  std::vector<std::vector<float>> pre_rope, queries, keys, values;  // [layer][T, heads, d]
};

}  // namespace kvaudit::unit::testing

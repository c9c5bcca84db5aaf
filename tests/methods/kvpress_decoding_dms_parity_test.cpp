// kvpress DMSPress(decoding=True) parity: DMSPress(KnormPress()) and DMSPress(KVzapPress(mlp)) of
// kvpress 0.5.5 at two thresholds each, sliding_window_size 8, against methods/dms.h (decoding =
// true) + runners/unit/dms_decoding.h on the tiny golden models (llama f32/bf16, qwen2 f32), from
// tests/golden/kvpress/kept_decoding_dms.json (tools/golden/kvpress_groups/dms_decoding.py).
//
// Per case, the unit runner's steps: the context (the prompt's first context_length tokens) is
// prefilled with a capture and dms selects (its prefill eviction, and the window's scores); the
// rest of the prompt is fed through DmsDecoding::feed (one observed prefill: its entries scored,
// what left the window judged); then generate_greedy_compressing decodes max_new_tokens tokens
// with the sequence's DmsDecoding. Required, per forward (prefill, rest, every decode step): the
// same (layer, KV head, position) evictions as kvpress's newly masked entries; the same greedy
// ids; the same final kept sets. From a forward whose judged scores lie near the threshold
// ("near_threshold": within a relative 2^-10 in bf16, 2^-20 in f32) a difference is legitimate and
// the case is compared only as far as it agrees.
// Mutation checks (run by hand, 2026-12-05): (1) judging each entry one step early (the window
// held as w − 1 entries, i.e. evicting position t − w + 1 at step t): all 12 cases differ at the
// rest forward (11 as failures, llama bf16 KNorm T = −4.5 after its recorded near-threshold
// score); (2) never evicting during decode steps (entries leave the window unjudged): all 12
// differ at decode step 1.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "methods/dms.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cpu/cpu_prefill_capture.h"
#include "runners/unit/decoding_compression.h"
#include "runners/unit/dms_decoding.h"
#include "tests/methods/golden_method.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::unit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Kept = std::vector<std::vector<std::vector<std::int32_t>>>;

const fs::path kGolden =
    fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept_decoding_dms.json";
const fs::path kModels = fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/tiny_models";

// What a selection evicted from positions 0..L-1: [layer][head] the positions not kept.
Kept complement(const Kept& kept, int length) {
  Kept out;
  for (const auto& layer : kept) {
    out.emplace_back();
    for (const auto& head : layer) {
      std::vector<std::int32_t> gone;
      std::size_t j = 0;
      for (std::int32_t t = 0; t < length; ++t) {
        if (j < head.size() && head[j] == t) {
          ++j;
        } else {
          gone.push_back(t);
        }
      }
      out.back().push_back(std::move(gone));
    }
  }
  return out;
}

Kept nothing_removed(int layers, int heads) {
  return Kept(static_cast<std::size_t>(layers),
              std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(heads)));
}

TEST(KvpressDecodingDmsParity, PerForwardEvictionsAndIdsMatchKvpress) {
  ASSERT_TRUE(fs::exists(kGolden))
      << kGolden << " is missing (tools/golden/kvpress_groups/dms_decoding.py)";
  std::ifstream in(kGolden);
  const json golden = json::parse(in);
  std::map<std::string, int> context_lengths;
  for (const json& p : golden.at("prompts"))
    context_lengths[p.at("id").get<std::string>()] = p.at("context_length").get<int>();
  const auto prompts = methods::testing::golden_prompts(golden);
  methods::testing::GoldenModels models(kModels);
  int cases = 0, exact = 0, tied = 0, decode_evictions = 0;
  for (const json& c : golden.at("cases")) {
    const std::string where =
        methods::testing::GoldenModels::directory(c) + " " + c.at("press").get<std::string>();
    const model::ModelWeights& w = models.weights(c);
    cpu::CpuModel engine(w, AttentionBackend::sdpa,
                         {.sdpa_numerics = cpu::SdpaNumerics::torch_cpu_flash});
    const std::string prompt = c.at("prompt").get<std::string>();
    const std::vector<std::int32_t>& ids = prompts.at(prompt);
    const int L = context_lengths.at(prompt);
    const std::span<const std::int32_t> context(ids.data(), static_cast<std::size_t>(L));
    const std::span<const std::int32_t> rest(ids.data() + L,
                                             ids.size() - static_cast<std::size_t>(L));
    const auto method =
        methods::testing::method_of_golden_config(c.at("method"), KVAUDIT_SOURCE_DIR);
    const auto* dms = dynamic_cast<const methods::DmsMethod*>(method.get());
    ASSERT_NE(dms, nullptr) << where;
    ASSERT_TRUE(dms->decoding()) << where;
    const double threshold = c.at("threshold").get<double>();
    const json& forwards = c.at("forwards");
    const int layers = w.config.num_layers, heads = w.config.num_kv_heads;

    bool tie_passed = false, stopped = false;
    std::string first_difference;
    auto compare = [&](const Kept& ours, const json& forward, const std::string& what) {
      if (stopped) return;
      tie_passed = tie_passed || forward.at("near_threshold").get<bool>();
      if (ours == forward.at("evicted").get<Kept>()) return;
      stopped = true;
      if (tie_passed) {
        first_difference = what + " (after a recorded near-threshold score)";
        return;
      }
      ADD_FAILURE() << where << ": " << what << ": evictions differ from kvpress's (no tie)";
      first_difference = what + " (no tie: a failure)";
    };

    // Prefill of the context, dms's selection (its prefill eviction and the window's scores).
    auto cache = engine.new_cache(0);
    cpu::CpuPrefillCapture capture(
        w.config, {.boundaries = {L}, .attention_input = method->needs_attention_input()});
    (void)engine.prefill(*cache, context, LogitRows::none, &capture);
    const methods::SelectionContext selection_context{};
    methods::Selection selection;
    {
      const auto& state = dynamic_cast<const cpu::SequenceState&>(*cache);
      const auto views = capture.layers(L, state, w, engine.rope_inv_freq());
      selection = method->select(views, {.threshold = threshold}, selection_context);
    }
    ASSERT_EQ(forwards.size(), c.at("max_new_tokens").get<std::size_t>() + 1) << where;
    compare(complement(selection.kept, L), forwards[0], "prefill");
    cache->retain(selection);

    // The rest, observed.
    DmsDecoding state(w.config, *dms, threshold, selection, L, selection_context,
                      /*record_kept=*/true);
    std::optional<CompressionEvent> fed;
    const LogitMatrix logits = state.feed(engine, *cache, rest, fed);
    ASSERT_TRUE(fed.has_value()) << where;  // recording: always an event
    compare(fed->removed, forwards[1], "rest");

    // Decoding.
    CompressingSequence sequence{.cache = cache.get(),
                                 .last_logits = logits.row(0),
                                 .method = method.get(),
                                 .policy = {},
                                 .context = selection_context,
                                 .dms = &state};
    const auto outputs = generate_greedy_compressing(
        engine, std::span<const CompressingSequence>(&sequence, 1),
        {.max_new_tokens = c.at("max_new_tokens").get<int>(), .eos_token_ids = {}},
        /*record_kept=*/true);
    const CompressingOutput& out = outputs.front();
    ASSERT_EQ(out.events.size() + 2, forwards.size()) << where << ": one event per decode step";
    for (std::size_t e = 0; e < out.events.size(); ++e) {
      const json& forward = forwards[e + 2];
      ASSERT_EQ(out.events[e].decode_step, static_cast<int>(e) + 1) << where;
      compare(out.events[e].removed, forward,
              "decode step " + std::to_string(out.events[e].decode_step));
      if (out.events[e].removed != nothing_removed(layers, heads)) ++decode_evictions;
    }
    if (!stopped) {
      Kept final_kept;
      for (int l = 0; l < layers; ++l) {
        final_kept.emplace_back();
        for (int h = 0; h < heads; ++h) {
          const CacheHeadEntries e = cache->head_entries(l, h);
          final_kept.back().emplace_back(e.positions.begin(), e.positions.end());
        }
      }
      EXPECT_EQ(final_kept, c.at("kept").get<Kept>()) << where << ": final kept sets";
    }
    const auto want_ids = c.at("ids").get<std::vector<std::int32_t>>();
    const bool case_tied = c.at("boundary_tie").get<bool>();
    if (!case_tied) {
      EXPECT_EQ(out.greedy.tokens, want_ids) << where;
    } else if (out.greedy.tokens != want_ids) {
      first_difference += "; ids differ";
    }
    ++cases;
    const bool equal = first_difference.empty() && out.greedy.tokens == want_ids;
    if (equal) ++exact;
    if (case_tied) ++tied;
    std::printf("%-84s %s\n", where.c_str(),
                equal ? "every forward's evictions and ids equal"
                      : ("differs at " + first_difference).c_str());
  }
  std::printf(
      "kvpress DMS decoding parity: %d cases, %d fully equal, %d with a near-threshold "
      "score; %d decode steps evicted something\n",
      cases, exact, tied, decode_evictions);
  EXPECT_GT(cases, 0);
  // The golden must exercise decode-time eviction, not only the prefill's.
  EXPECT_GT(decode_evictions, cases);
}

}  // namespace
}  // namespace kvaudit::unit

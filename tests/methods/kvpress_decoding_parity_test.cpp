// kvpress decode-time compression parity: DecodingPress(KnormPress), DecodingPress(TOVAPress),
// DecodingPress(SnapKVPress(window_size=3)) and PrefillDecodingPress(SnapKVPress(window 8),
// DecodingPress(KnormPress)) of kvpress 0.5.5 against runners/unit/decoding_compression.h on the
// tiny golden models (f32 and bf16), from tests/golden/kvpress/kept_decoding.json
// (tools/golden/kvpress_groups/decoding.py).
//
// Per case: the whole prompt is prefilled (PrefillDecodingPress: its prefill method evicts through
// the prefill capture, as the unit runner does), then generate_greedy_compressing runs the
// recorded number of tokens with the recorded interval and target. Required: the same greedy ids,
// the same decode steps compressing, and per event the same kept set of every (layer, KV head).
// A kept set at or after a recorded boundary tie (scores equal across the n_kept cut, "tie" /
// "prefill_tie") may legitimately differ, and so may everything after it, so from the first tie
// on a case is compared only as far as it still agrees and the difference is printed.
// kvpress gathers kept rows in score order, kvaudit keeps position order: the same keys are
// attended, summed in another order (a bf16 rounding can differ) and torch's top-k breaks exact
// ties by input order. Where that changed kvpress's outcome the golden also holds the run with
// kvpress's cache re-sorted into position order ("position_order"), and that is the reference.
//
// KvpressDecodingRatioParity: the same comparison for CompressionRatioDecodingPress (KNorm and
// SnapKV window 3 at ratio 0.5, KNorm at 0.98 — target 1, so kvpress's `q_len ≥ target_size`
// trigger compresses at every step — and PrefillDecodingPress(SnapKV, ratio KNorm)), from
// tests/golden/kvpress/kept_decoding_ratio.json (tools/golden/kvpress_groups/decoding_ratio.py),
// with DecodingPolicy::target_compression_ratio; each event's target must also equal kvpress's
// max(1, int(T·(1 − r))), T = max(position_ids) + 1. Mutation checks (run by hand, 2026-12-04):
// (1) the target from the cache length, max(1, int(k_len·(1 − r))), instead of the tokens seen:
// all 9 r = 0.5 cases differ — from the second event (decode step 8; the first sees k_len = T)
// and, after a SnapKV prefill, from the first — 8 as kept-set failures, the qwen2 f32 KNorm one
// after a recorded tie and caught by its per-event target check; the test also asserts that
// every case whose targets are not all 1 has an event where the two rules differ, so the golden
// keeps telling them apart. (2) dropping the `target ≤ 1` trigger: the 0.98 cases fail (events
// every 4 steps instead of every step).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "runners/cpu/cpu_model.h"
#include "runners/cpu/cpu_prefill_capture.h"
#include "runners/model/formats/load_weights.h"
#include "runners/unit/decoding_compression.h"
#include "tests/methods/golden_method.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::unit {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Kept = std::vector<std::vector<std::vector<std::int32_t>>>;

const fs::path kGolden = fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept_decoding.json";
const fs::path kRatioGolden =
    fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept_decoding_ratio.json";
const fs::path kModels = fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/tiny_models";

std::unique_ptr<methods::Method> method_of(const json& m) {
  return methods::testing::method_of_golden(m);
}

struct Outcome {
  int cases = 0, exact = 0, tied = 0;
};

// Runs every case of `golden_path` (kept_decoding.json's shape; a case with
// "target_compression_ratio" instead of "target_size" is CompressionRatioDecodingPress, its
// events carry kvpress's per-step "target_size") and prints one line per case.
void check_golden(const fs::path& golden_path, const char* title, Outcome& outcome) {
  EXPECT_TRUE(fs::exists(golden_path))
      << golden_path << " is missing (tools/golden/kvpress_groups/ makes it)";
  if (!fs::exists(golden_path)) return;
  std::ifstream in(golden_path);
  const json golden = json::parse(in);
  const auto prompts = methods::testing::golden_prompts(golden);
  methods::testing::GoldenModels models(kModels);
  for (const json& c : golden.at("cases")) {
    const std::string where =
        methods::testing::GoldenModels::directory(c) + " " + c.at("press").get<std::string>();
    const model::ModelWeights* w = &models.weights(c);
    // HF ran on the CPU: its flash kernel's numerics (cpu_model.h).
    cpu::CpuModel engine(*w, AttentionBackend::sdpa,
                         {.sdpa_numerics = cpu::SdpaNumerics::torch_cpu_flash});
    const std::vector<std::int32_t>& ids = prompts.at(c.at("prompt").get<std::string>());
    const int L = static_cast<int>(ids.size());
    auto cache = engine.new_cache(0);
    // Compared until the first difference; one at or after a recorded tie is legitimate (a tie
    // with equal kept sets can still order kvpress's cache otherwise), one before is a failure.
    bool tie_passed = false, stopped = false;
    std::string first_difference;
    auto compare = [&](const Kept& ours, const json& theirs, bool tie, const std::string& what) {
      if (stopped) return;
      tie_passed = tie_passed || tie;
      if (ours == theirs.get<Kept>()) return;
      stopped = true;
      if (tie_passed) {
        first_difference = what + " (after a recorded tie)";
        return;
      }
      ADD_FAILURE() << where << ": " << what << ": kept sets differ from kvpress's (no tie)";
      first_difference = what + " (no tie: a failure)";
    };

    LogitMatrix logits;
    if (!c.at("prefill_method").is_null()) {
      const auto prefill_method = method_of(c.at("prefill_method"));
      cpu::CpuPrefillCapture capture(w->config, {.boundaries = {L}, .window_rows = 64});
      logits = engine.prefill(*cache, ids, LogitRows::last, &capture);
      const auto& state = dynamic_cast<const cpu::SequenceState&>(*cache);
      const auto layers = capture.layers(L, state, *w, engine.rope_inv_freq());
      const methods::Selection kept = prefill_method->select(
          layers, {.compression = c.at("prefill_compression").get<double>()}, {});
      compare(kept.kept, c.at("prefill_kept"), c.at("prefill_tie").get<bool>(), "prefill");
      cache->retain(kept);
    } else {
      logits = engine.prefill(*cache, ids, LogitRows::last);
    }

    const auto decoding_method = method_of(c.at("decoding_method"));
    DecodingPolicy policy{
        .compression_interval = c.at("compression_interval").get<int>(),
        .hidden_states_buffer_size = c.at("hidden_states_buffer_size").get<int>()};
    const bool by_ratio = c.contains("target_compression_ratio");
    if (by_ratio) {
      policy.target_compression_ratio = c.at("target_compression_ratio").get<double>();
    } else {
      policy.target_size = c.at("target_size").get<int>();
    }
    CompressingSequence sequence{.cache = cache.get(),
                                 .last_logits = logits.row(0),
                                 .method = decoding_method.get(),
                                 .policy = policy,
                                 .context = {}};
    const auto outputs = generate_greedy_compressing(
        engine, std::span<const CompressingSequence>(&sequence, 1),
        {.max_new_tokens = c.at("max_new_tokens").get<int>(), .eos_token_ids = {}},
        /*record_kept=*/true);
    const CompressingOutput& out = outputs.front();
    // kvpress's own run, or (where kvpress's score-ordered cache changed the outcome) the same run
    // with its cache kept in position order, kvaudit's order (the golden's "position_order").
    const bool reordered = !c.at("position_order").is_null();
    const json& reference = reordered ? c.at("position_order") : c;
    const auto& events = reference.at("events");
    // The event's target: the case's fixed one, or kvpress's of that step (ratio).
    auto target_of = [&](const json& event) {
      return by_ratio ? event.at("target_size").get<std::int64_t>()
                      : c.at("target_size").get<std::int64_t>();
    };
    ASSERT_EQ(out.events.size(), events.size()) << where;
    for (std::size_t e = 0; e < events.size(); ++e) {
      EXPECT_EQ(out.events[e].decode_step, events[e].at("decode_step").get<int>()) << where;
      EXPECT_EQ(out.events[e].target_size, target_of(events[e])) << where << " event " << e;
      compare(out.events[e].kept, events[e].at("kept"), events[e].at("tie").get<bool>(),
              "event " + std::to_string(e) + " (decode step " +
                  std::to_string(out.events[e].decode_step) + ")");
    }
    // Before its first decode-time compression kvpress's cache is still in position order (a
    // DecodingPress alone), so the first event must equal kvpress's own, reordered or not.
    if (reordered && c.at("prefill_method").is_null() && !c.at("events").empty() &&
        !c.at("events")[0].at("tie").get<bool>() && !out.events.empty()) {
      EXPECT_EQ(out.events[0].kept, c.at("events")[0].at("kept").get<Kept>())
          << where << ": first compression differs from kvpress's own";
    }
    const auto want_ids = reference.at("ids").get<std::vector<std::int32_t>>();
    const bool tied = reference.at("boundary_tie").get<bool>();
    if (!tied) {
      EXPECT_EQ(out.greedy.tokens, want_ids) << where;
    } else if (out.greedy.tokens != want_ids) {
      first_difference += "; ids differ";
    }
    ++outcome.cases;
    if (first_difference.empty() && out.greedy.tokens == want_ids) ++outcome.exact;
    if (tied) ++outcome.tied;
    const std::string against = reordered ? " (vs kvpress with its cache in position order)" : "";
    std::printf("%-78s %s%s\n", where.c_str(),
                first_difference.empty() && out.greedy.tokens == want_ids
                    ? "all events and ids equal"
                    : ("differs at " + first_difference).c_str(),
                against.c_str());
    int evicting = 0;  // events whose cache exceeded the target in some layer
    bool k_len_rule_differs = false;
    for (const auto& e : events) {
      bool evicts = false;
      for (const auto& k : e.at("k_len")) {
        const auto k_len = k.get<std::int64_t>();
        if (k_len <= target_of(e)) continue;
        evicts = true;
        // The mutation of the header comment: the target from the cache length.
        if (by_ratio) {
          const double r = c.at("target_compression_ratio").get<double>();
          const auto from_k_len = std::max<std::int64_t>(
              1, static_cast<std::int64_t>(static_cast<double>(k_len) * (1.0 - r)));
          k_len_rule_differs = k_len_rule_differs || from_k_len != target_of(e);
        }
      }
      evicting += evicts ? 1 : 0;
    }
    EXPECT_EQ(out.compressions, evicting) << where;
    // Where every target is 1 (ratio 0.98 here) both rules give 1; elsewhere the golden must tell
    // them apart.
    const bool all_targets_one =
        std::all_of(events.begin(), events.end(), [&](const json& e) { return target_of(e) == 1; });
    if (by_ratio && !all_targets_one) {
      EXPECT_TRUE(k_len_rule_differs)
          << where << ": no event where the cache-length rule would keep another count";
    }
  }
  std::printf("%s: %d cases, %d fully equal, %d with a recorded tie\n", title, outcome.cases,
              outcome.exact, outcome.tied);
}

TEST(KvpressDecodingParity, PerStepKeptSetsAndIdsMatchKvpress) {
  Outcome outcome;
  check_golden(kGolden, "kvpress decoding parity", outcome);
  EXPECT_GT(outcome.cases, 0);
}

TEST(KvpressDecodingRatioParity, CompressionRatioDecodingPressKeptSetsAndIdsMatchKvpress) {
  Outcome outcome;
  check_golden(kRatioGolden, "kvpress ratio decoding parity", outcome);
  EXPECT_GT(outcome.cases, 0);
}

}  // namespace
}  // namespace kvaudit::unit

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
// A kept set after a recorded boundary tie (scores equal across the n_kept cut, "tie" /
// "prefill_tie") may legitimately differ, and so may everything after it, so from the first tie
// on a case is compared only as far as it still agrees and the difference is printed.
// kvpress gathers kept rows in score order, kvaudit keeps position order: the same keys are
// attended, summed in another order (a bf16 rounding can differ) and torch's top-k breaks exact
// ties by input order. Where that changed kvpress's outcome the golden also holds the run with
// kvpress's cache re-sorted into position order ("position_order"), and that is the reference.
#include <gtest/gtest.h>

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
const fs::path kModels = fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/tiny_models";

std::unique_ptr<methods::Method> method_of(const json& m) {
  return methods::testing::method_of_golden(m);
}

struct Outcome {
  int cases = 0, exact = 0, tied = 0;
};

TEST(KvpressDecodingParity, PerStepKeptSetsAndIdsMatchKvpress) {
  ASSERT_TRUE(fs::exists(kGolden)) << kGolden
                                   << " is missing (tools/golden/kvpress_groups/"
                                      "decoding.py makes it)";
  std::ifstream in(kGolden);
  const json golden = json::parse(in);
  const auto prompts = methods::testing::golden_prompts(golden);
  methods::testing::GoldenModels models(kModels);
  Outcome outcome;
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
    bool diverged = false;  // a tie was passed: later differences are legitimate
    std::string first_difference;
    auto compare = [&](const Kept& ours, const json& theirs, bool tie, const std::string& what) {
      if (diverged) return;
      const Kept want = theirs.get<Kept>();
      if (ours != want) {
        if (tie) {
          diverged = true;
          first_difference = what + " (after a recorded tie)";
          return;
        }
        ADD_FAILURE() << where << ": " << what << ": kept sets differ from kvpress's (no tie)";
        diverged = true;
        first_difference = what + " (no tie: a failure)";
        return;
      }
      if (tie) diverged = true;  // equal here, but later steps may legitimately differ
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
    CompressingSequence sequence{
        .cache = cache.get(),
        .last_logits = logits.row(0),
        .method = decoding_method.get(),
        .policy = {.compression_interval = c.at("compression_interval").get<int>(),
                   .target_size = c.at("target_size").get<int>(),
                   .hidden_states_buffer_size = c.at("hidden_states_buffer_size").get<int>()},
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
    ASSERT_EQ(out.events.size(), events.size()) << where;
    for (std::size_t e = 0; e < events.size(); ++e) {
      EXPECT_EQ(out.events[e].decode_step, events[e].at("decode_step").get<int>()) << where;
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
    std::printf("%-66s %s%s\n", where.c_str(),
                first_difference.empty() && out.greedy.tokens == want_ids
                    ? "all events and ids equal"
                    : ("differs at " + first_difference).c_str(),
                against.c_str());
    int evicting = 0;  // events whose cache exceeded the target in some layer
    for (const auto& e : events)
      for (const auto& k : e.at("k_len"))
        if (k.get<int>() > c.at("target_size").get<int>()) {
          ++evicting;
          break;
        }
    EXPECT_EQ(out.compressions, evicting) << where;
  }
  std::printf("kvpress decoding parity: %d cases, %d fully equal, %d with a recorded tie\n",
              outcome.cases, outcome.exact, outcome.tied);
  EXPECT_GT(outcome.cases, 0);
}

}  // namespace
}  // namespace kvaudit::unit

// kvpress CAMPress parity (decode-time cache merging, runners/unit/cam_merging.h): CAMPress over
// KnormPress and SnapKVPress(window_size=3) of kvpress 0.5.5 against
// runners/unit/decoding_compression.h with merge_budget > 0 on the tiny golden models (llama f32
// and bf16, qwen2 f32), from tests/golden/kvpress/kept_decoding_cam.json
// (tools/golden/kvpress_groups/cam.py).
//
// The Bernoulli merge draws come from torch's global RNG on kvpress's side; the golden replaced
// torch.bernoulli by the deterministic rule M = (P >= 0.5) and this test injects the same rule
// (CompressingSequence::merge_draw). Per case: the whole prompt is prefilled, then
// generate_greedy_compressing runs the recorded number of tokens. Required: the same greedy ids,
// the same decode steps compressing, and per event the same kept set of every (layer, KV head),
// the same number of passed merge draws and the same post-merge value rows (their sums per entry,
// within a few f32 ulps: torch sums in its own order). After a recorded tie of the mean scores at
// the target_size cut or a merge probability within 1e-3 of the rule's 0.5 ("tie" / "p_edge") a
// reimplementation may legitimately differ: a case is compared as far as it agrees, and a
// difference at or after such a flag is printed, not failed (ids are then not required either).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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
using Sums = std::vector<std::vector<std::vector<double>>>;

const fs::path kGolden =
    fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept_decoding_cam.json";
const fs::path kModels = fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/tiny_models";

std::unique_ptr<methods::Method> method_of(const json& m) {
  return methods::testing::method_of_golden(m);
}

// Largest |ours − theirs| / max(1, |theirs|) over every entry; +inf for another shape.
double value_sum_gap(const Sums& ours, const Sums& theirs) {
  if (ours.size() != theirs.size()) return INFINITY;
  double gap = 0.0;
  for (std::size_t l = 0; l < ours.size(); ++l) {
    if (ours[l].size() != theirs[l].size()) return INFINITY;
    for (std::size_t h = 0; h < ours[l].size(); ++h) {
      if (ours[l][h].size() != theirs[l][h].size()) return INFINITY;
      for (std::size_t i = 0; i < ours[l][h].size(); ++i)
        gap = std::max(gap, std::abs(ours[l][h][i] - theirs[l][h][i]) /
                                std::max(1.0, std::abs(theirs[l][h][i])));
    }
  }
  return gap;
}

TEST(KvpressCamParity, PerStepKeptSetsMergedValuesAndIdsMatchKvpress) {
  ASSERT_TRUE(fs::exists(kGolden))
      << kGolden << " is missing (tools/golden/kvpress_groups/cam.py makes it)";
  std::ifstream in(kGolden);
  const json golden = json::parse(in);
  ASSERT_EQ(golden.at("draw_rule").get<std::string>(), "M = (P >= 0.5)");
  const auto prompts = methods::testing::golden_prompts(golden);
  methods::testing::GoldenModels models(kModels);
  int cases = 0, exact = 0, flagged = 0, events_compared = 0;
  std::printf("%-58s %6s %7s %10s  %s\n", "case", "events", "merges", "value gap", "outcome");
  for (const json& c : golden.at("cases")) {
    const std::string where =
        methods::testing::GoldenModels::directory(c) + " " + c.at("press").get<std::string>();
    const model::ModelWeights* w = &models.weights(c);
    cpu::CpuModel engine(*w, AttentionBackend::sdpa,
                         {.sdpa_numerics = cpu::SdpaNumerics::torch_cpu_flash});
    const std::vector<std::int32_t>& ids = prompts.at(c.at("prompt").get<std::string>());
    auto cache = engine.new_cache(0);
    const LogitMatrix logits = engine.prefill(*cache, ids, LogitRows::last);
    const auto decoding_method = method_of(c.at("decoding_method"));
    CompressingSequence sequence{
        .cache = cache.get(),
        .last_logits = logits.row(0),
        .method = decoding_method.get(),
        .policy = {.compression_interval = c.at("compression_interval").get<int>(),
                   .target_size = c.at("target_size").get<int>(),
                   .hidden_states_buffer_size = c.at("hidden_states_buffer_size").get<int>(),
                   .merge_budget = c.at("merge_budget").get<int>()},
        .context = {},
        .merge_draw = [](float p) { return p >= 0.5f; }};
    const auto outputs = generate_greedy_compressing(
        engine, std::span<const CompressingSequence>(&sequence, 1),
        {.max_new_tokens = c.at("max_new_tokens").get<int>(), .eos_token_ids = {}},
        /*record_kept=*/true);
    const CompressingOutput& out = outputs.front();
    const auto& events = c.at("events");
    const double tolerance = c.at("dtype").get<std::string>() == "bf16" ? 1e-2 : 1e-4;
    bool flagged_so_far = false;  // a tie / P edge at or before the current event
    bool diverged = false;        // an event differed (legitimately: after a flag)
    std::string first_difference;
    double gap = 0.0;
    int merges = 0;
    EXPECT_EQ(out.events.size(), events.size()) << where;
    for (std::size_t e = 0; e < std::min(events.size(), out.events.size()) && !diverged; ++e) {
      const json& want = events[e];
      const CompressionEvent& got = out.events[e];
      flagged_so_far =
          flagged_so_far || want.at("tie").get<bool>() || want.at("p_edge").get<bool>();
      const std::string what = "event " + std::to_string(e) + " (decode step " +
                               std::to_string(want.at("decode_step").get<int>()) + ")";
      const double event_gap = value_sum_gap(got.value_sums, want.at("value_sums").get<Sums>());
      const bool same = got.decode_step == want.at("decode_step").get<int>() &&
                        got.kept == want.at("kept").get<Kept>() &&
                        got.merges == want.at("merges").get<int>() && event_gap <= tolerance;
      if (same) {
        ++events_compared;
        gap = std::max(gap, event_gap);
        merges += got.merges;
        continue;
      }
      diverged = true;
      if (flagged_so_far) {
        first_difference = what + " (after a recorded tie / P at the rule's edge)";
      } else {
        ADD_FAILURE() << where << ": " << what << " differs from kvpress's: step "
                      << got.decode_step << ", kept equal "
                      << (got.kept == want.at("kept").get<Kept>()) << ", merges " << got.merges
                      << " vs " << want.at("merges").get<int>() << ", value-sum gap " << event_gap;
        first_difference = what + " (no tie: a failure)";
      }
    }
    const auto want_ids = c.at("ids").get<std::vector<std::int32_t>>();
    const bool tied = c.at("boundary_tie").get<bool>() || c.at("p_edge").get<bool>();
    if (!diverged) {
      EXPECT_EQ(out.greedy.tokens, want_ids) << where;
    } else if (out.greedy.tokens != want_ids) {
      first_difference += "; ids differ";
    }
    ++cases;
    const bool all = !diverged && out.greedy.tokens == want_ids;
    if (all) ++exact;
    if (tied) ++flagged;
    std::printf(
        "%-58s %6zu %7d %10.2e  %s\n", where.c_str(), events.size(), merges, gap,
        all ? "all events, merged values and ids equal"
            : (first_difference.empty() ? std::string("equal up to a recorded tie / edge; ids ") +
                                              (out.greedy.tokens == want_ids ? "equal" : "differ")
                                        : "differs at " + first_difference)
                  .c_str());
  }
  std::printf(
      "kvpress CAM parity: %d cases, %d fully equal, %d with a recorded tie or P edge, %d events "
      "compared equal\n",
      cases, exact, flagged, events_compared);
  EXPECT_GT(cases, 0);
}

}  // namespace
}  // namespace kvaudit::unit

// kvpress parity: the kept sets of our methods against real kvpress 0.5.5 on the tiny golden models
// (tests/golden/kvpress/kept.json, tools/golden/make_kvpress_golden.py).
//
// For every golden case the test prefills the case's tokens with our CpuModel (the case's attention
// backend and dtype), captures the layers with the production capture (runners/unit/
// cpu_prefill_capture.h: keys/values from the SequenceState, window queries, eager column sums,
// pre-RoPE query moments, o_proj, rope_inv_freq), builds the method from the case's method config
// (methods/method_factory.h) and compares kept sets per (layer, KV head):
//   overlap = |ours ∩ kvpress| / |kvpress|.
// It prints `[kvpress] press dtype cr protocol mean min tie-cases` per group, then per press and
// dtype the overall numbers, and asserts over the cases WITHOUT a boundary tie (kvgold's flag: an
// exact tie in kvpress's own scores straddles a selection boundary) mean ≥ 0.98 and min ≥ 0.90
// (docs/design/kvpress.md §Parity acceptance); kept counts must match exactly there (AdaKV: per
// layer).
// Ties are broken as torch's CPU topk does (methods/top_k.h), which is what makes e.g. SnapKV with
// n_kept < window (only tied window tokens compete) match exactly. Why some overlaps stay below 1:
//  * bf16 cases: kvpress scores in bf16 (EA's moments and softmax, ObservedAttention's sums,
//    KeyDiff's normalisation, CriticalKV's ‖W_oV‖); we emulate SnapKV/TOVA's rounding points but
//    compute the others in double, so near-tied scores can swap at the budget boundary.
//  * ChunkKV f32 tied cases: several all-window chunks tie at the protected value; torch's f32
//    chunk means differ from ours in the last bit, so another chunk (of another size) wins.
//  * Knorm f32 tied cases: exact norm ties in kvpress's f32 vector_norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "methods/method_factory.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/formats/load_weights.h"
#include "runners/cpu/cpu_prefill_capture.h"

#ifndef KVAUDIT_SOURCE_DIR
#error "KVAUDIT_SOURCE_DIR must be defined"
#endif

namespace kvaudit::methods {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kGolden = fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/kvpress/kept.json";
const fs::path kModels = fs::path(KVAUDIT_SOURCE_DIR) / "tests/golden/tiny_models";

ParamValue param_of(const json& v, const std::string& where) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  throw std::runtime_error(where + ": unsupported parameter value " + v.dump());
}

// The golden's nested method object → configs; the nested scorer is registered under a name.
MethodConfig config_of(const json& m, std::map<std::string, MethodConfig>& named,
                       const std::string& name) {
  MethodConfig c{name,
                 m.at("id").get<std::string>(),
                 m.at("variant").is_null() ? "" : m.at("variant").get<std::string>(),
                 {}};
  for (const auto& [k, v] : m.at("params").items()) c.params[k] = param_of(v, name + "." + k);
  if (!m.at("scorer").is_null()) {
    const std::string inner = name + ".scorer";
    named[inner] = config_of(m.at("scorer"), named, inner);
    c.params["scorer"] = inner;
  }
  return c;
}

struct Group {
  double sum = 0;
  double min = 1;
  std::int64_t count = 0;
  int ties = 0;
  void add(double overlap) {
    sum += overlap;
    min = std::min(min, overlap);
    ++count;
  }
  double mean() const { return count ? sum / static_cast<double>(count) : 0; }
};

TEST(KvpressParity, KeptSetsMatchKvpress) {
  // The golden is committed (made by the real kvpress with tools/golden/): missing is a failure.
  ASSERT_TRUE(fs::exists(kGolden)) << "the committed golden " << kGolden << " is missing";
  std::ifstream in(kGolden);
  const json golden = json::parse(in);
  std::map<std::string, const json*> prompts;
  for (const auto& p : golden.at("prompts")) prompts[p.at("id").get<std::string>()] = &p;

  // Cases grouped by (model, dtype, attn, prompt, protocol): one prefill each.
  std::map<std::string, std::vector<const json*>> by_prefill;
  for (const auto& c : golden.at("cases"))
    by_prefill[c.at("model").get<std::string>() + "/" + c.at("dtype").get<std::string>() + "/" +
               c.at("attn").get<std::string>() + "/" + c.at("prompt").get<std::string>() + "/" +
               c.at("protocol").get<std::string>()]
        .push_back(&c);

  std::map<std::string, Group> groups;          // press|dtype|cr|protocol
  std::map<std::string, Group> presses;         // press|dtype
  std::map<std::string, Group> presses_untied;  // press|dtype, cases without boundary ties
  std::map<std::string, std::unique_ptr<model::ModelWeights>> weights_cache;
  for (const auto& [key, cases] : by_prefill) {
    const json& first = *cases.front();
    const std::string model_dir =
        first.at("model").get<std::string>() + "/" + first.at("dtype").get<std::string>();
    auto& weights = weights_cache[model_dir];
    if (!weights)
      weights =
          std::make_unique<model::ModelWeights>(model::load_model_weights(kModels / model_dir));
    const auto backend =
        first.at("attn") == "eager" ? AttentionBackend::eager : AttentionBackend::sdpa;
    cpu::CpuModel model(*weights, backend);
    const json& prompt = *prompts.at(first.at("prompt").get<std::string>());
    std::vector<std::int32_t> tokens = prompt.at("context_ids").get<std::vector<std::int32_t>>();
    if (first.at("protocol") == "query-aware")
      for (const auto t : prompt.at("question_ids").get<std::vector<std::int32_t>>())
        tokens.push_back(t);
    const int L = static_cast<int>(tokens.size());
    ASSERT_EQ(L, first.at("length").get<int>()) << key;

    cpu::CpuPrefillCapture capture(weights->config, {.boundaries = {L},
                                                   .window_rows = 64,
                                                   .column_sums = true,
                                                   .query_moments = true,
                                                   .moments_first_row = 4});
    auto state = model.new_sequence();
    model.prefill(state, tokens, LogitRows::none, &capture);
    const auto layers = capture.layers(L, state, *weights, model.rope_inv_freq());

    for (const json* cp : cases) {
      const json& c = *cp;
      std::map<std::string, MethodConfig> named;
      const std::string press = c.at("press").get<std::string>();
      const MethodConfig config = config_of(c.at("method"), named, press);
      const auto method = make_method(config, [&](const std::string& n) -> const MethodConfig* {
        auto it = named.find(n);
        return it == named.end() ? nullptr : &it->second;
      });
      const double cr = c.at("compression").get<double>();
      const Selection ours =
          method->select(layers, {.compression = cr}, {.seed = 0, .cell_key = 0});
      const auto& theirs = c.at("kept");
      ASSERT_EQ(ours.kept.size(), theirs.size()) << key << " " << press;
      const bool adaptive = config.id == "adakv";
      char cr_text[16];
      std::snprintf(cr_text, sizeof cr_text, "%.2f", cr);
      const std::string dtype = c.at("dtype").get<std::string>();
      const std::string gkey =
          press + "|" + dtype + "|" + cr_text + "|" + c.at("protocol").get<std::string>();
      Group& g = groups[gkey];
      Group& p = presses[press + "|" + dtype];
      const bool tie = c.at("boundary_tie").get<bool>();
      Group& untied = presses_untied[press + "|" + dtype];
      if (tie) ++g.ties;
      for (std::size_t l = 0; l < theirs.size(); ++l) {
        std::size_t ours_total = 0, theirs_total = 0;
        for (std::size_t h = 0; h < theirs[l].size(); ++h) {
          const auto want = theirs[l][h].get<std::vector<std::int32_t>>();
          const auto& got = ours.kept[l][h];
          ours_total += got.size();
          theirs_total += want.size();
          if (!adaptive && !tie) {
            EXPECT_EQ(got.size(), want.size())
                << key << " " << press << " cr " << cr << " layer " << l << " head " << h;
          }
          std::vector<std::int32_t> common;
          std::set_intersection(got.begin(), got.end(), want.begin(), want.end(),
                                std::back_inserter(common));
          const double overlap =
              want.empty() ? 1.0
                           : static_cast<double>(common.size()) / static_cast<double>(want.size());
          g.add(overlap);
          p.add(overlap);
          if (!tie) untied.add(overlap);
        }
        if (!tie) {
          EXPECT_EQ(ours_total, theirs_total)
              << key << " " << press << " cr " << cr << " layer " << l;
        }
      }
    }
  }
  std::printf("[kvpress] %-48s %-5s %-5s %-15s %-7s %-7s %s\n", "press", "dtype", "cr", "protocol",
              "mean", "min", "tie-cases");
  for (const auto& [k, g] : groups) {
    std::vector<std::string> f;
    std::size_t s = 0, e;
    while ((e = k.find('|', s)) != std::string::npos) {
      f.push_back(k.substr(s, e - s));
      s = e + 1;
    }
    f.push_back(k.substr(s));
    std::printf("[kvpress] %-48s %-5s %-5s %-15s %.4f  %.4f  %d\n", f[0].c_str(), f[1].c_str(),
                f[2].c_str(), f[3].c_str(), g.mean(), g.min, g.ties);
  }
  // Acceptance (docs/design/kvpress.md §Parity acceptance): per press and dtype, over the head
  // sets of the cases
  // WITHOUT a boundary tie, mean ≥ 0.98 and min ≥ 0.90. In a tied case kvpress's own scores leave
  // the choice open (e.g. ChunkKV when several all-window chunks tie at the protected value:
  // torch's f32 chunk means differ from ours in the last bit, so another chunk, of another size,
  // wins); those numbers are printed, not asserted.
  for (const auto& [k, p] : presses) {
    const Group& u = presses_untied[k];
    std::printf(
        "[kvpress] overall %-46s mean %.4f min %.4f | untied: mean %.4f min %.4f (%lld of "
        "%lld)\n",
        k.c_str(), p.mean(), p.min, u.mean(), u.count ? u.min : 1.0,
        static_cast<long long>(u.count), static_cast<long long>(p.count));
    ASSERT_GT(u.count, 0) << k << ": every case has a boundary tie";
    EXPECT_GE(u.mean(), 0.98) << k;
    EXPECT_GE(u.min, 0.90) << k;
  }
}

}  // namespace
}  // namespace kvaudit::methods

// method_factory and method_resolution: every catalogue method builds and records its typed
// parameters, defaults per variant come from the one description (the catalogue's bindings to the
// method_params.h structs), observation windows follow scorer references, and every bad
// configuration is an std::invalid_argument naming the config.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "methods/method_factory.h"
#include "methods/method_resolution.h"

namespace kvaudit::methods {
namespace {

// A MethodConfig (designated initializers would warn about the omitted members).
MethodConfig cfg(std::string id, std::map<std::string, ParamValue> params = {},
                 std::string variant = "", std::string name = "x") {
  return MethodConfig{std::move(name), std::move(id), std::move(variant), std::move(params)};
}

std::string error_of(const MethodConfig& c, const ConfigResolver& r = {}) {
  try {
    make_method(c, r);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

struct Configs {
  std::map<std::string, MethodConfig> by_name;
  ConfigResolver resolver() const {
    return [this](const std::string& n) -> const MethodConfig* {
      auto it = by_name.find(n);
      return it == by_name.end() ? nullptr : &it->second;
    };
  }
};

TEST(Factory, BuildsEveryScorerAndWrapper) {
  Configs cs;
  cs.by_name["snap"] = cfg("snapkv", {}, "", "snap");
  cs.by_name["ea"] = cfg("expected_attention", {{"epsilon", 0.01}}, "", "ea");
  for (const char* id : {"full", "random", "knorm", "streaming_llm", "snapkv", "tova",
                         "observed_attention", "expected_attention", "keydiff", "pyramidkv"}) {
    EXPECT_NO_THROW(make_method(cfg(id, {}, ""))) << id;
  }
  EXPECT_EQ(make_method(cfg("snapkv", {}, ""))->window_needed(), 64);
  EXPECT_EQ(make_method(cfg("snapkv", {}, "original"))->window_needed(), 32);
  EXPECT_EQ(make_method(cfg("keydiff", {}, "block"))->name(), "keydiff(block)");
  EXPECT_EQ(make_method(cfg("adakv", {{"scorer", std::string("ea")}}, ""), cs.resolver())->name(),
            "adakv(expected_attention)");
  EXPECT_TRUE(make_method(cfg("adakv", {{"scorer", std::string("ea")}}, ""), cs.resolver())
                  ->needs_query_moments());
  EXPECT_EQ(
      make_method(cfg("chunkkv", {{"scorer", std::string("snap")}}, ""), cs.resolver())->name(),
      "chunkkv(snapkv)");
  EXPECT_EQ(make_method(cfg("criticalkv", {{"scorer", std::string("snap")}}, ""), cs.resolver())
                ->window_needed(),
            64);
  // Reals accept integers.
  EXPECT_NO_THROW(make_method(cfg("expected_attention", {{"epsilon", std::int64_t{0}}})));
}

TEST(Factory, BuildsTheMethodsBeyondKvpress) {
  EXPECT_EQ(make_method(cfg("defensivekv", {}, ""))->window_needed(), 32);
  EXPECT_EQ(
      make_method(cfg("layer_defensivekv", {{"window", std::int64_t{16}}}, ""))->window_needed(),
      16);
  EXPECT_EQ(std::get<ReFreeKvParams>(make_method(cfg("refreekv", {}, ""))->parameters()).window, 8);
  EXPECT_DOUBLE_EQ(
      std::get<H2oParams>(make_method(cfg("h2o", {}, ""))->parameters()).heavy_fraction, 0.5);
}

// A committed sample file (relative to the source tree) for every file parameter
// (ParamType::path), keyed "<method id>.<parameter>".
const std::map<std::string, std::string> kSampleFiles = {
    {"headkv.head_scores", "tests/golden/head_budgets/tiny_head_scores.json"},
    {"qfilter.filters", "tests/golden/artefacts/qfilter_tiny/model.safetensors"},
    {"expected_attention_stats.statistics",
     "tests/golden/artefacts/ea_stats_llama_f32/model.safetensors"},
    {"duo_attention.pattern", "tests/golden/artefacts/duo_pattern_llama_f32.tsv"},
    {"fastkvzip.gates", "tests/golden/artefacts/fastkvzip_gates_f32.safetensors"},
    {"lukv.curve", "tests/golden/kvpress/artefacts/lukv_curve_llama.npy"},
    {"kvzap.model", "tests/golden/artefacts/kvzap_mlp_tiny/model.safetensors"},
    {"restorekv.restore_embeddings",
     "tests/golden/artefacts/restorekv_tiny_llama/restore_embeddings.safetensors"},
    {"restorekv.adapter", "tests/golden/artefacts/restorekv_tiny_llama"},
    // sample files: insert "id.param" entries before this line
};

// Every catalogue method resolves with its defaults, and the built method records exactly the
// resolved typed parameters (what device fast paths read).
TEST(Factory, EveryCatalogueMethodRecordsItsTypedParameters) {
  Configs cs;
  cs.by_name["snap"] = cfg("snapkv", {}, "", "snap");
  for (const MethodSpec& spec : method_catalog()) {
    for (const std::string& variant :
         spec.variants.empty() ? std::vector<std::string>{""} : spec.variants) {
      MethodConfig c = cfg(spec.id, {}, variant, spec.id);
      for (const ParamSpec& p : spec.params) {
        if (p.type == ParamType::method_ref) c.params[p.name] = std::string("snap");
        // List parameters (required): one press, one ratio (methods/param_lists.h string form).
        if (p.type == ParamType::method_ref_list) c.params[p.name] = std::string("snap");
        if (p.type == ParamType::real_list) c.params[p.name] = std::string("0.5");
        // Path parameters the variant requires (one with a variant default, such as
        // duo_attention on_the_fly's empty pattern, stays unset).
        if (p.type == ParamType::path && !default_for(p, variant)) {
          const auto sample = kSampleFiles.find(spec.id + "." + p.name);
          ASSERT_NE(sample, kSampleFiles.end())
              << spec.id << "." << p.name << ": a file parameter without a sample file";
          c.params[p.name] = std::string(KVAUDIT_SOURCE_DIR) + "/" + sample->second;
        }
      }
      const ResolvedMethod resolved = resolve_method(c, cs.resolver());
      EXPECT_FALSE(std::holds_alternative<std::monostate>(resolved.params)) << spec.id;
      const auto method = make_method(resolved);
      EXPECT_EQ(method->parameters().index(), resolved.params.index()) << spec.id << variant;
      EXPECT_EQ(resolved.scorer != nullptr, scorer_reference(resolved.params) != nullptr)
          << spec.id;
    }
  }
}

TEST(Resolution, DefaultsComeFromTheStructsAndTheVariantOverrides) {
  const auto kvpress = std::get<SnapKvParams>(resolve_method(cfg("snapkv", {}, "")).params);
  EXPECT_EQ(kvpress.variant, SnapKvVariant::kvpress);
  EXPECT_EQ(kvpress.window, SnapKvParams{}.window);
  EXPECT_EQ(kvpress.kernel_size, 5);
  EXPECT_EQ(kvpress.pooling, Pooling::avg);
  const auto original =
      std::get<SnapKvParams>(resolve_method(cfg("snapkv", {}, "original")).params);
  EXPECT_EQ(original.variant, SnapKvVariant::original);
  EXPECT_EQ(original.window, 32);
  EXPECT_EQ(original.kernel_size, 7);
  EXPECT_EQ(original.pooling, Pooling::max);
  const auto given = std::get<ExpectedAttentionParams>(
      resolve_method(
          cfg("expected_attention", {{"epsilon", std::int64_t{2}}, {"use_vnorm", false}}))
          .params);
  EXPECT_DOUBLE_EQ(given.epsilon, 2.0);  // an integer for a real
  EXPECT_FALSE(given.use_vnorm);
  EXPECT_EQ(given.n_future_positions, 512);
  // The catalogue's defaults are the structs' initializers.
  const ParamSpec& window = find_method("pyramidkv")->params.front();
  EXPECT_EQ(window.name, "window");
  EXPECT_EQ(std::get<std::int64_t>(*window.default_value), PyramidKvParams{}.window);
}

TEST(Resolution, ObservationWindowsFollowScorerReferences) {
  Configs cs;
  cs.by_name["snap"] = cfg("snapkv", {{"window", std::int64_t{48}}}, "", "snap");
  cs.by_name["knorm"] = cfg("knorm", {}, "", "knorm");
  const auto wrapped = observation_window(
      resolve_method(cfg("adakv", {{"scorer", std::string("snap")}}, "", "ada"), cs.resolver()));
  ASSERT_TRUE(wrapped.has_value());
  EXPECT_EQ(wrapped->size, 48);
  EXPECT_EQ(wrapped->owner, "snap");
  const auto own = observation_window(resolve_method(cfg("defensivekv", {}, "", "d")));
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(own->size, 32);
  EXPECT_EQ(own->owner, "d");
  EXPECT_FALSE(
      observation_window(resolve_method(cfg("chunkkv", {{"scorer", std::string("knorm")}}, "", "c"),
                                        cs.resolver()))
          .has_value());
}

TEST(Factory, RejectsUnknownsAndWrongTypes) {
  EXPECT_NE(error_of(cfg("nope", {}, "", "x")).find("unknown method 'nope'"), std::string::npos);
  EXPECT_NE(error_of(cfg("snapkv", {}, "v9", "x")).find("unknown variant 'v9'"), std::string::npos);
  EXPECT_NE(
      error_of(cfg("knorm", {{"window", std::int64_t{3}}})).find("unknown parameter 'window'"),
      std::string::npos);
  EXPECT_NE(error_of(cfg("snapkv", {{"window", 2.5}}, "", "x"))
                .find("parameter 'window' must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of(cfg("snapkv", {{"kernel_size", std::int64_t{4}}})).find("must be odd"),
            std::string::npos);
  EXPECT_NE(error_of(cfg("snapkv", {{"pooling", std::string("min")}}, "", "x"))
                .find("expected one of: avg, max"),
            std::string::npos);
  EXPECT_NE(error_of(cfg("adakv", {{"alpha", 1.5}}, "", "x")).find("above"), std::string::npos);
  EXPECT_NE(error_of(cfg("adakv", {}, "", "x")).find("missing required parameter 'scorer'"),
            std::string::npos);
  EXPECT_NE(
      error_of(cfg("expected_attention", {{"use_vnorm", 1.0}}, "", "x")).find("must be a boolean"),
      std::string::npos);
  EXPECT_NE(error_of(cfg("nope", {}, "", "cfg")).find("method config 'cfg'"), std::string::npos);
}

TEST(Factory, WrapperScorerMustBeAScorer) {
  Configs cs;
  cs.by_name["crit"] = cfg("criticalkv", {{"scorer", std::string("snap")}}, "", "crit");
  cs.by_name["snap"] = cfg("snapkv", {}, "", "snap");
  cs.by_name["blk"] = cfg("keydiff", {}, "block", "blk");
  cs.by_name["self"] = cfg("adakv", {{"scorer", std::string("self")}}, "", "self");
  const auto r = cs.resolver();
  EXPECT_NE(error_of(cfg("adakv", {{"scorer", std::string("crit")}}, "", "a"), r)
                .find("which is not a scorer"),
            std::string::npos);
  EXPECT_NE(error_of(cfg("adakv", {{"scorer", std::string("blk")}}, "", "a"), r)
                .find("not a scorer; wrap keydiff variant 'oneshot'"),
            std::string::npos);
  EXPECT_NE(error_of(cfg("adakv", {{"scorer", std::string("zzz")}}, "", "a"), r)
                .find("'zzz', which is not defined"),
            std::string::npos);
  EXPECT_NE(error_of(cfg("chunkkv", {{"scorer", std::string("snap")}}, "", "a"))
                .find("no config resolver"),
            std::string::npos);
  EXPECT_NE(error_of(cs.by_name["self"], r).find("reference cycle"), std::string::npos);
}

}  // namespace
}  // namespace kvaudit::methods

// method_factory: every catalogue method builds (the extras' ones when their headers are present),
// defaults per variant, and every bad configuration is an std::invalid_argument naming the config.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "methods/method_factory.h"

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

TEST(Factory, ExtrasMethodsBuildWhenPresent) {
#if __has_include("methods/defensivekv.h")
  EXPECT_NO_THROW(make_method(cfg("defensivekv", {}, "")));
#endif
#if __has_include("methods/layer_defensivekv.h")
  EXPECT_NO_THROW(make_method(cfg("layer_defensivekv", {}, "")));
#endif
#if __has_include("methods/refreekv.h")
  EXPECT_NO_THROW(make_method(cfg("refreekv", {}, "")));
#endif
#if __has_include("methods/h2o.h")
  EXPECT_NO_THROW(make_method(cfg("h2o", {}, "")));
#endif
  SUCCEED();
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

// make_method / make_scorer (method_factory.h).
#include "methods/method_factory.h"

#include <cmath>
#include <set>
#include <stdexcept>

#include "methods/adakv.h"
#include "methods/chunkkv.h"
#include "methods/criticalkv.h"
#include "methods/expected_attention.h"
#include "methods/full.h"
#include "methods/keydiff.h"
#include "methods/knorm.h"
#include "methods/observed_attention.h"
#include "methods/pyramidkv.h"
#include "methods/random.h"
#include "methods/scorer_method.h"
#include "methods/snapkv.h"
#include "methods/streaming_llm.h"
#include "methods/tova.h"
#if __has_include("methods/defensivekv.h")
#include "methods/defensivekv.h"
#define KVAUDIT_HAVE_DEFENSIVEKV 1
#endif
#if __has_include("methods/layer_defensivekv.h")
#include "methods/layer_defensivekv.h"
#define KVAUDIT_HAVE_LAYER_DEFENSIVEKV 1
#endif
#if __has_include("methods/refreekv.h")
#include "methods/refreekv.h"
#define KVAUDIT_HAVE_REFREEKV 1
#endif
#if __has_include("methods/h2o.h")
#include "methods/h2o.h"
#define KVAUDIT_HAVE_H2O 1
#endif

namespace kvaudit::methods {
namespace {

std::string label(const MethodConfig& c) {
  return c.name.empty() ? "method config (" + c.id + ")"
                        : "method config '" + c.name + "' (" + c.id + ")";
}

[[noreturn]] void fail(const MethodConfig& c, const std::string& what) {
  throw std::invalid_argument(label(c) + ": " + what);
}

std::string type_name(ParamType t) {
  switch (t) {
    case ParamType::integer:
      return "an integer";
    case ParamType::real:
      return "a number";
    case ParamType::boolean:
      return "a boolean";
    case ParamType::choice:
      return "one of the listed choices";
    case ParamType::method_ref:
      return "the name of a method config";
  }
  return "?";
}

// A validated config: variant resolved, every parameter present with the right type.
struct Resolved {
  const MethodSpec* spec = nullptr;
  std::string variant;
  std::map<std::string, ParamValue> params;

  std::int64_t integer(const std::string& n) const { return std::get<std::int64_t>(params.at(n)); }
  int small_int(const std::string& n) const { return static_cast<int>(integer(n)); }
  double real(const std::string& n) const {
    const auto& v = params.at(n);
    if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
    return std::get<double>(v);
  }
  bool boolean(const std::string& n) const { return std::get<bool>(params.at(n)); }
  const std::string& text(const std::string& n) const {
    return std::get<std::string>(params.at(n));
  }
};

void check_value(const MethodConfig& c, const ParamSpec& p, const ParamValue& v) {
  const std::string where = "parameter '" + p.name + "'";
  double number = 0;
  switch (p.type) {
    case ParamType::integer:
      if (!std::holds_alternative<std::int64_t>(v))
        fail(c, where + " must be " + type_name(p.type));
      number = static_cast<double>(std::get<std::int64_t>(v));
      if (p.odd_only && std::get<std::int64_t>(v) % 2 == 0) fail(c, where + " must be odd");
      break;
    case ParamType::real:
      if (const auto* i = std::get_if<std::int64_t>(&v)) {
        number = static_cast<double>(*i);
      } else if (const auto* d = std::get_if<double>(&v)) {
        number = *d;
        if (!std::isfinite(number)) fail(c, where + " must be finite");
      } else {
        fail(c, where + " must be " + type_name(p.type));
      }
      break;
    case ParamType::boolean:
      if (!std::holds_alternative<bool>(v)) fail(c, where + " must be " + type_name(p.type));
      return;
    case ParamType::choice: {
      const auto* s = std::get_if<std::string>(&v);
      if (s == nullptr) fail(c, where + " must be a string");
      for (const auto& choice : p.choices)
        if (choice == *s) return;
      std::string list;
      for (const auto& choice : p.choices) list += (list.empty() ? "" : ", ") + choice;
      fail(c, where + " is '" + *s + "', expected one of: " + list);
    }
    case ParamType::method_ref:
      if (!std::holds_alternative<std::string>(v) || std::get<std::string>(v).empty())
        fail(c, where + " must be " + type_name(p.type));
      return;
  }
  if (number < p.min)
    fail(c, where + " = " + std::to_string(number) + " is below " + std::to_string(p.min));
  if (p.max > p.min && (p.max_exclusive ? number >= p.max : number > p.max))
    fail(c, where + " = " + std::to_string(number) + " is above " + std::to_string(p.max));
}

Resolved resolve_config(const MethodConfig& c) {
  Resolved r;
  r.spec = find_method(c.id);
  if (r.spec == nullptr)
    fail(c, "unknown method '" + c.id + "'; known methods: " + method_id_list());
  r.variant = c.variant;
  if (r.variant.empty()) {
    if (!r.spec->variants.empty()) r.variant = r.spec->variants.front();
  } else {
    bool known = false;
    std::string list;
    for (const auto& v : r.spec->variants) {
      known = known || v == r.variant;
      list += (list.empty() ? "" : ", ") + v;
    }
    if (!known)
      fail(c, "unknown variant '" + r.variant + "'" +
                  (list.empty() ? " (the method has no variants)" : "; variants: " + list));
  }
  for (const auto& [name, value] : c.params) {
    const ParamSpec* spec = nullptr;
    for (const auto& p : r.spec->params)
      if (p.name == name) spec = &p;
    if (spec == nullptr) fail(c, "unknown parameter '" + name + "'");
    check_value(c, *spec, value);
  }
  for (const auto& p : r.spec->params) {
    if (auto it = c.params.find(p.name); it != c.params.end()) {
      r.params[p.name] = it->second;
    } else if (auto def = default_for(p, r.variant)) {
      r.params[p.name] = *def;
    } else {
      fail(c, "missing required parameter '" + p.name + "'");
    }
  }
  return r;
}

std::shared_ptr<const Scorer> scorer_of(const MethodConfig& c, const ConfigResolver& resolve,
                                        std::set<std::string>& visiting);

// The scorer a wrapper names in its `scorer` parameter.
std::shared_ptr<const Scorer> wrapped_scorer(const MethodConfig& c, const Resolved& r,
                                             const ConfigResolver& resolve,
                                             std::set<std::string>& visiting) {
  const std::string& ref = r.text("scorer");
  if (!resolve) fail(c, "parameter 'scorer' names '" + ref + "' but no config resolver was given");
  const MethodConfig* inner = resolve(ref);
  if (inner == nullptr) fail(c, "parameter 'scorer' names '" + ref + "', which is not defined");
  if (!visiting.insert(ref).second) fail(c, "scorer reference cycle through '" + ref + "'");
  const MethodSpec* spec = find_method(inner->id);
  if (spec != nullptr && !spec->is_scorer)
    fail(c, "parameter 'scorer' names '" + ref + "' (" + inner->id +
                "), which is not a scorer; wrappers take one of the scorer methods");
  auto scorer = scorer_of(*inner, resolve, visiting);
  visiting.erase(ref);
  return scorer;
}

std::shared_ptr<const Scorer> scorer_of(const MethodConfig& c, const ConfigResolver& resolve,
                                        std::set<std::string>& visiting) {
  (void)resolve;
  (void)visiting;
  const Resolved r = resolve_config(c);
  const std::string& id = r.spec->id;
  if (!r.spec->is_scorer) fail(c, "'" + id + "' is not a scorer");
  if (id == "random") return std::make_shared<RandomScorer>();
  if (id == "knorm") return std::make_shared<KnormScorer>();
  if (id == "streaming_llm") return std::make_shared<StreamingLlmScorer>(r.small_int("n_sink"));
  if (id == "snapkv") {
    return std::make_shared<SnapKvScorer>(SnapKvParams{
        .variant = r.variant == "original" ? SnapKvVariant::original : SnapKvVariant::kvpress,
        .window = r.small_int("window"),
        .kernel_size = r.small_int("kernel_size"),
        .pooling = r.text("pooling") == "max" ? Pooling::max : Pooling::avg});
  }
  if (id == "pyramidkv") {
    return std::make_shared<SnapKvScorer>(SnapKvParams{.variant = SnapKvVariant::kvpress,
                                                       .window = r.small_int("window"),
                                                       .kernel_size = r.small_int("kernel_size"),
                                                       .pooling = Pooling::avg});
  }
  if (id == "tova")
    return std::make_shared<TovaScorer>(r.variant == "original" ? TovaVariant::original
                                                                : TovaVariant::kvpress);
  if (id == "observed_attention") return std::make_shared<ObservedAttentionScorer>();
  if (id == "expected_attention") {
    return std::make_shared<ExpectedAttentionScorer>(
        ExpectedAttentionParams{.n_future_positions = r.small_int("n_future_positions"),
                                .n_sink = r.small_int("n_sink"),
                                .use_covariance = r.boolean("use_covariance"),
                                .use_vnorm = r.boolean("use_vnorm"),
                                .epsilon = r.real("epsilon")});
  }
  if (id == "keydiff") {
    if (r.variant == "block")
      fail(c,
           "keydiff variant 'block' is a block-iterative selection, not a scorer; wrap "
           "keydiff variant 'oneshot'");
    return std::make_shared<KeyDiffScorer>();
  }
  fail(c, "'" + id +
              "' has no scorer that wrappers can reuse (its selection is not a per-head "
              "top-k of one score tensor)");
}

}  // namespace

std::shared_ptr<const Scorer> make_scorer(const MethodConfig& config,
                                          const ConfigResolver& resolve) {
  std::set<std::string> visiting;
  if (!config.name.empty()) visiting.insert(config.name);
  return scorer_of(config, resolve, visiting);
}

std::unique_ptr<Method> make_method(const MethodConfig& config, const ConfigResolver& resolve) {
  const Resolved r = resolve_config(config);
  const std::string& id = r.spec->id;
  std::set<std::string> visiting;
  if (!config.name.empty()) visiting.insert(config.name);
  if (id == "full") return std::make_unique<FullMethod>();
  if (id == "pyramidkv")
    return std::make_unique<PyramidKvMethod>(
        PyramidKvParams{.window = r.small_int("window"),
                        .kernel_size = r.small_int("kernel_size"),
                        .beta = r.small_int("beta")});
  if (id == "keydiff" && r.variant == "block")
    return std::make_unique<BlockKeyDiffMethod>(r.small_int("block_size"));
  if (id == "adakv")
    return std::make_unique<AdaKvMethod>(
        wrapped_scorer(config, r, resolve, visiting), r.real("alpha"),
        r.variant == "original" ? AdaKvVariant::original : AdaKvVariant::kvpress);
  if (id == "chunkkv")
    return std::make_unique<ChunkKvMethod>(wrapped_scorer(config, r, resolve, visiting),
                                           r.small_int("chunk_length"));
  if (id == "criticalkv")
    return std::make_unique<ScorerMethod>(
        std::make_shared<CriticalKvScorer>(wrapped_scorer(config, r, resolve, visiting),
                                           r.real("first_stage_ratio"), r.real("epsilon")));
  if (id == "defensivekv") {
#ifdef KVAUDIT_HAVE_DEFENSIVEKV
    return std::make_unique<DefensiveKvMethod>(r.small_int("window"));
#else
    fail(config, "defensivekv is not built into this binary (methods/defensivekv.h missing)");
#endif
  }
  if (id == "layer_defensivekv") {
#ifdef KVAUDIT_HAVE_LAYER_DEFENSIVEKV
    return std::make_unique<LayerDefensiveKvMethod>(r.small_int("window"));
#else
    fail(config, "layer_defensivekv is not built (methods/layer_defensivekv.h missing)");
#endif
  }
  if (id == "refreekv") {
#ifdef KVAUDIT_HAVE_REFREEKV
    return std::make_unique<ReFreeKvMethod>(r.small_int("window"));
#else
    fail(config, "refreekv is not built (methods/refreekv.h missing)");
#endif
  }
  if (id == "h2o") {
#ifdef KVAUDIT_HAVE_H2O
    return std::make_unique<H2oMethod>(r.real("heavy_fraction"));
#else
    fail(config, "h2o is not built (methods/h2o.h missing)");
#endif
  }
  if (r.spec->is_scorer)
    return std::make_unique<ScorerMethod>(scorer_of(config, resolve, visiting));
  fail(config, "no implementation for method '" + id + "'");
}

}  // namespace kvaudit::methods

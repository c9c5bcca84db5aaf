// The method catalogue (catalog.h): one entry per method, each parameter declared once and bound to
// its member of the method's typed struct (method_params.h), whose initializer gives the default.
#include "methods/catalog.h"

#include <utility>

namespace kvaudit::methods {
namespace {

template <typename E>
using Names = std::vector<std::pair<std::string, E>>;

template <typename P>
ParamSpec integer(std::string name, int P::*field, double min, double max, std::string doc) {
  ParamSpec spec{.name = std::move(name),
                 .type = ParamType::integer,
                 .doc = std::move(doc),
                 .default_value = ParamValue{std::int64_t{P{}.*field}},
                 .min = min,
                 .max = max};
  spec.assign = [field](MethodParams& all, const ParamValue& value) {
    std::get<P>(all).*field = static_cast<int>(std::get<std::int64_t>(value));
  };
  return spec;
}

template <typename P>
ParamSpec real(std::string name, double P::*field, double min, double max, bool max_exclusive,
               std::string doc) {
  ParamSpec spec{.name = std::move(name),
                 .type = ParamType::real,
                 .doc = std::move(doc),
                 .default_value = ParamValue{P{}.*field},
                 .min = min,
                 .max = max,
                 .max_exclusive = max_exclusive};
  spec.assign = [field](MethodParams& all, const ParamValue& value) {
    const auto* integer_value = std::get_if<std::int64_t>(&value);
    std::get<P>(all).*field =
        integer_value != nullptr ? static_cast<double>(*integer_value) : std::get<double>(value);
  };
  return spec;
}

template <typename P>
ParamSpec boolean(std::string name, bool P::*field, std::string doc) {
  ParamSpec spec{.name = std::move(name),
                 .type = ParamType::boolean,
                 .doc = std::move(doc),
                 .default_value = ParamValue{P{}.*field}};
  spec.assign = [field](MethodParams& all, const ParamValue& value) {
    std::get<P>(all).*field = std::get<bool>(value);
  };
  return spec;
}

template <typename P, typename E>
ParamSpec choice(std::string name, E P::*field, Names<E> names, std::string doc) {
  ParamSpec spec{.name = std::move(name), .type = ParamType::choice, .doc = std::move(doc)};
  for (const auto& [text, value] : names) {
    spec.choices.push_back(text);
    if (value == P{}.*field) spec.default_value = ParamValue{text};
  }
  spec.assign = [field, names](MethodParams& all, const ParamValue& value) {
    for (const auto& [text, member] : names) {
      if (text == std::get<std::string>(value)) std::get<P>(all).*field = member;
    }
  };
  return spec;
}

// A wrapper's `scorer`: the name of another method config (required: no default).
template <typename P>
ParamSpec scorer_ref(std::string P::*field) {
  ParamSpec spec{.name = "scorer",
                 .type = ParamType::method_ref,
                 .doc = "name of the method config (in this manifest) whose scores are wrapped"};
  spec.assign = [field](MethodParams& all, const ParamValue& value) {
    std::get<P>(all).*field = std::get<std::string>(value);
  };
  return spec;
}

ParamSpec with_variant_default(ParamSpec spec, const std::string& variant, ParamValue value) {
  spec.variant_default[variant] = std::move(value);
  return spec;
}

// A method without variants (or with one that changes nothing in its struct).
template <typename P>
std::function<MethodParams(std::string_view)> plain() {
  return [](std::string_view) { return MethodParams{P{}}; };
}

// A method whose variant is a member of its struct; `names` in catalogue order (the first is the
// default variant).
template <typename P, typename E>
std::function<MethodParams(std::string_view)> with_variants(E P::*field, Names<E> names) {
  return [field, names](std::string_view variant) {
    P params{};
    for (const auto& [text, value] : names) {
      if (text == variant) params.*field = value;
    }
    return MethodParams{params};
  };
}

template <typename E>
std::vector<std::string> variant_names(const Names<E>& names) {
  std::vector<std::string> out;
  for (const auto& name : names) out.push_back(name.first);
  return out;
}

constexpr double kUnbounded = 0;  // max <= min: no upper bound

const Names<SnapKvVariant> kSnapKvVariants{{"kvpress", SnapKvVariant::kvpress},
                                           {"original", SnapKvVariant::original}};
const Names<Pooling> kPoolings{{"avg", Pooling::avg}, {"max", Pooling::max}};
const Names<TovaVariant> kTovaVariants{{"kvpress", TovaVariant::kvpress},
                                       {"original", TovaVariant::original}};
const Names<AdaKvVariant> kAdaKvVariants{{"kvpress", AdaKvVariant::kvpress},
                                         {"original", AdaKvVariant::original}};
const Names<KeyDiffVariant> kKeyDiffVariants{{"oneshot", KeyDiffVariant::oneshot},
                                             {"block", KeyDiffVariant::block}};

std::vector<MethodSpec> build_catalog() {
  std::vector<MethodSpec> c;
  c.push_back({.id = "full",
               .summary = "no eviction: the full-KV reference",
               .citation = "",
               .axis = BudgetAxis::none,
               .variants = {},
               .params = {},
               .is_scorer = false,
               .typed_defaults = plain<FullParams>()});
  c.push_back({.id = "random",
               .summary = "uniform random scores (Philox keyed by cell id)",
               .citation = "kvpress RandomPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {},
               .is_scorer = true,
               .typed_defaults = plain<RandomParams>()});
  c.push_back({.id = "knorm",
               .summary = "s(j) = -||K_j||_2 per KV head, in fp32",
               .citation = "Devoto et al. 2024, 'A Simple and Effective L2 Norm-Based Strategy for "
                           "KV Cache Compression'; kvpress KnormPress (PR #280: fp32)",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {},
               .is_scorer = true,
               .typed_defaults = plain<KnormParams>()});
  c.push_back({.id = "streaming_llm",
               .summary = "keep n_sink first tokens and the most recent ones",
               .citation = "Xiao et al. 2024, 'Efficient Streaming Language Models with Attention "
                           "Sinks'",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {integer("n_sink", &StreamingLlmParams::n_sink, 0, kUnbounded,
                                  "number of initial (sink) tokens kept")},
               .is_scorer = true,
               .typed_defaults = plain<StreamingLlmParams>()});
  {
    ParamSpec k = integer("kernel_size", &SnapKvParams::kernel_size, 1, 255,
                          "pooling kernel over the scores");
    k.odd_only = true;
    c.push_back(
        {.id = "snapkv",
         .summary = "observation-window attention, pooled",
         .citation =
             "Li et al. 2024, 'SnapKV: LLM Knows What You are Looking for Before Generation'",
         .axis = BudgetAxis::ratio,
         .variants = variant_names(kSnapKvVariants),
         .params = {with_variant_default(integer("window", &SnapKvParams::window, 1, kUnbounded,
                                                 "observation window w (last w queries)"),
                                         "original", ParamValue{std::int64_t{32}}),
                    with_variant_default(std::move(k), "original", ParamValue{std::int64_t{7}}),
                    with_variant_default(
                        choice("pooling", &SnapKvParams::pooling, kPoolings, "pooling kind"),
                        "original", ParamValue{std::string("max")})},
         .is_scorer = true,
         .typed_defaults = with_variants(&SnapKvParams::variant, kSnapKvVariants)});
  }
  c.push_back({.id = "tova",
               .summary = "attention of the last query, averaged over all heads",
               .citation = "Oren et al. 2024, 'Transformers are Multi-State RNNs'",
               .axis = BudgetAxis::ratio,
               .variants = variant_names(kTovaVariants),
               .params = {},
               .is_scorer = true,
               .typed_defaults = with_variants(&TovaParams::variant, kTovaVariants)});
  c.push_back({.id = "observed_attention",
               .summary = "H2O-like: attention column sums / (L - j)",
               .citation = "kvpress ObservedAttentionPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {},
               .is_scorer = true,
               .typed_defaults = plain<ObservedAttentionParams>()});
  c.push_back(
      {.id = "h2o",
       .summary = "heavy hitters (unnormalised column sums) + recent window",
       .citation =
           "Zhang et al. 2023, 'H2O: Heavy-Hitter Oracle for Efficient Generative Inference'",
       .axis = BudgetAxis::ratio,
       .variants = {"original"},
       .params = {real("heavy_fraction", &H2oParams::heavy_fraction, 0, 1, false,
                       "share of the kept budget given to heavy hitters; the rest is recent")},
       .is_scorer = false,
       .typed_defaults = plain<H2oParams>()});
  c.push_back(
      {.id = "expected_attention",
       .summary = "attention expected from future query statistics",
       .citation = "Devoto et al. 2025, 'Expected Attention'; kvpress ExpectedAttentionPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {integer("n_future_positions", &ExpectedAttentionParams::n_future_positions, 1,
                          kUnbounded, "future positions averaged"),
                  integer("n_sink", &ExpectedAttentionParams::n_sink, 0, kUnbounded,
                          "sink tokens excluded and kept"),
                  boolean("use_covariance", &ExpectedAttentionParams::use_covariance,
                          "use the query covariance term"),
                  boolean("use_vnorm", &ExpectedAttentionParams::use_vnorm,
                          "rescale by value norms"),
                  real("epsilon", &ExpectedAttentionParams::epsilon, 0, kUnbounded, false,
                       "additive epsilon")},
       .is_scorer = true,
       .typed_defaults = plain<ExpectedAttentionParams>()});
  c.push_back({.id = "keydiff",
               .summary = "negative cosine similarity to the mean normalised key",
               .citation = "Park et al. 2025, 'KeyDiff: Key Similarity-Based KV Cache Eviction'",
               .axis = BudgetAxis::ratio,
               .variants = variant_names(kKeyDiffVariants),
               .params = {integer("block_size", &KeyDiffParams::block_size, 1, kUnbounded,
                                  "block size of the block variant")},
               .is_scorer = true,
               .typed_defaults = with_variants(&KeyDiffParams::variant, kKeyDiffVariants)});
  c.push_back(
      {.id = "adakv",
       .summary = "head-adaptive budget over any scorer within a layer",
       .citation = "Feng et al. 2024, 'Ada-KV'; kvpress AdaKVPress",
       .axis = BudgetAxis::ratio,
       .variants = variant_names(kAdaKvVariants),
       .params = {scorer_ref(&AdaKvParams::scorer),
                  real("alpha", &AdaKvParams::alpha, 0, 1, false, "safeguard fraction per head")},
       .is_scorer = false,
       .typed_defaults = with_variants(&AdaKvParams::variant, kAdaKvVariants)});
  {
    ParamSpec k = integer("kernel_size", &PyramidKvParams::kernel_size, 1, 255, "pooling kernel");
    k.odd_only = true;
    c.push_back(
        {.id = "pyramidkv",
         .summary = "SnapKV scores with a pyramidal per-layer budget",
         .citation = "Cai et al. 2024, 'PyramidKV'; kvpress PyramidKVPress",
         .axis = BudgetAxis::ratio,
         .variants = {},
         .params = {integer("window", &PyramidKvParams::window, 1, kUnbounded,
                            "observation window"),
                    std::move(k),
                    integer("beta", &PyramidKvParams::beta, 1, kUnbounded, "pyramid steepness")},
         .is_scorer = true,
         .typed_defaults = plain<PyramidKvParams>()});
  }
  c.push_back({.id = "chunkkv",
               .summary = "chunk-level selection over any scorer",
               .citation = "Liu et al. 2025, 'ChunkKV'; kvpress ChunkKVPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {scorer_ref(&ChunkKvParams::scorer),
                          integer("chunk_length", &ChunkKvParams::chunk_length, 1, kUnbounded,
                                  "tokens per chunk")},
               .is_scorer = false,
               .typed_defaults = plain<ChunkKvParams>()});
  c.push_back({.id = "criticalkv",
               .summary = "two-stage selection with output-projection value norms",
               .citation = "Feng et al. 2025, 'CriticalKV'; kvpress CriticalKVPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {scorer_ref(&CriticalKvParams::scorer),
                          real("first_stage_ratio", &CriticalKvParams::first_stage_ratio, 0, 1,
                               false, "budget share of stage 1"),
                          real("epsilon", &CriticalKvParams::epsilon, 0, kUnbounded, false,
                               "additive epsilon")},
               .is_scorer = false,
               .typed_defaults = plain<CriticalKvParams>()});
  c.push_back({.id = "defensivekv",
               .summary = "defensive aggregation, head-adaptive within a layer",
               .citation = "Feng et al. 2025, 'Taming the Fragility of KV Cache Eviction' "
                           "(DefensiveKV)",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {integer("window", &DefensiveKvParams::window, 1, kUnbounded,
                                  "observation window")},
               .is_scorer = false,
               .typed_defaults = plain<DefensiveKvParams>()});
  c.push_back({.id = "layer_defensivekv",
               .summary = "DefensiveKV with one budget across all layers",
               .citation = "Feng et al. 2025 (Layer-DefensiveKV)",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {integer("window", &LayerDefensiveKvParams::window, 1, kUnbounded,
                                  "observation window")},
               .is_scorer = false,
               .typed_defaults = plain<LayerDefensiveKvParams>()});
  c.push_back({.id = "refreekv",
               .summary = "request-adaptive pruning with threshold T on the last-token attention",
               .citation = "ReFreeKV (formerly 'Towards Threshold-Free KV Cache Pruning')",
               .axis = BudgetAxis::threshold,
               .variants = {},
               .params = {integer("window", &ReFreeKvParams::window, 1, kUnbounded,
                                  "recent window always kept")},
               .is_scorer = false,
               .typed_defaults = plain<ReFreeKvParams>()});
  return c;
}

}  // namespace

const std::vector<MethodSpec>& method_catalog() {
  static const std::vector<MethodSpec> catalog = build_catalog();
  return catalog;
}

const MethodSpec* find_method(std::string_view id) {
  for (const auto& m : method_catalog()) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

std::string method_id_list() {
  std::string s;
  for (const auto& m : method_catalog()) {
    if (!s.empty()) s += ", ";
    s += m.id;
  }
  return s;
}

std::optional<ParamValue> default_for(const ParamSpec& param, std::string_view variant) {
  if (auto it = param.variant_default.find(std::string(variant)); it != param.variant_default.end())
    return it->second;
  return param.default_value;
}

}  // namespace kvaudit::methods

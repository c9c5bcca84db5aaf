// The method catalogue (catalog.h): one entry per method, each parameter declared once and bound to
// its member of the method's typed struct (method_params.h), whose initializer gives the default.
#include "methods/catalog.h"

#include <utility>

#include "methods/artefact_files.h"
#include "methods/fastkvzip_gates.h"
#include "methods/head_scores_file.h"
#include "methods/kvzap_model.h"
#include "methods/npy_file.h"
#include "methods/param_lists.h"
#include "methods/restorekv_artefacts.h"
#include "methods/wrapper_budgets.h"

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

// A file the method reads (ParamType::path), required (no default); `check_file` validates its
// content at plan time (may be empty).
template <typename P>
ParamSpec file_path(std::string name, std::string P::*field, std::string doc,
                    std::function<void(const std::string&)> check_file = {}) {
  ParamSpec spec{.name = std::move(name), .type = ParamType::path, .doc = std::move(doc)};
  spec.check_file = std::move(check_file);
  spec.assign = [field](MethodParams& all, const ParamValue& value) {
    std::get<P>(all).*field = std::get<std::string>(value);
  };
  return spec;
}

// A path parameter naming a directory of which the method reads `files`.
template <typename P>
ParamSpec directory_path(std::string name, std::string P::*field, std::string doc,
                         std::vector<std::string> files,
                         std::function<void(const std::string&)> check_directory) {
  ParamSpec spec = file_path(std::move(name), field, std::move(doc), std::move(check_directory));
  spec.directory_files = std::move(files);
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

const Names<CompactorVariant> kCompactorVariants{
    {"kvpress", CompactorVariant::kvpress}, {"fixed_blending", CompactorVariant::fixed_blending}};

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
               .typed_defaults = plain<KnormParams>(),
               .per_entry_scorer = true});
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
  c.push_back({.id = "lagkv",
               .summary = "lag-relative key/value spread, ranked within partitions",
               .citation = "Liang et al. 2025, 'LagKV: Lag-Relative Information of the KV Cache "
                           "Tells Which Tokens Are Important'; kvpress LagKVPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {integer("n_sink", &LagKvParams::n_sink, 0, kUnbounded,
                                  "initial (sink) tokens always kept"),
                          integer("lag_size", &LagKvParams::lag_size, 1, kUnbounded,
                                  "partition length; each partition is scored against the next"),
                          boolean("cross_scoring", &LagKvParams::cross_scoring,
                                  "compare raw scores across partitions instead of ranks within "
                                  "each")},
               .is_scorer = true,
               .typed_defaults = plain<LagKvParams>()});
  c.push_back(
      {.id = "cur",
       .summary = "approximate leverage scores of keys and values (CUR decomposition)",
       .citation = "Sengupta et al. 2025, 'Value-Guided KV Compression for LLMs via Approximated "
                   "CUR Decomposition' (CurDKV); kvpress CURPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {integer("num_sinks", &CurParams::num_sinks, 0, kUnbounded,
                          "initial tokens always kept"),
                  choice("leverage_type", &CurParams::leverage_type,
                         Names<CurLeverage>{{"key", CurLeverage::key},
                                            {"value", CurLeverage::value},
                                            {"kv_avg", CurLeverage::kv_avg},
                                            {"kv_product", CurLeverage::kv_product}},
                         "squared norms used: key, value, their mean or their product"),
                  boolean("use_local_approximation", &CurParams::use_local_approximation,
                          "normalise the squared norms within windows of local_window_size"),
                  integer("local_window_size", &CurParams::local_window_size, 1, kUnbounded,
                          "window length of the local approximation")},
       .is_scorer = true,
       .typed_defaults = plain<CurParams>()});
  c.push_back({.id = "simlayerkv",
               .summary = "lazy layers (attention on initial + recent tokens > threshold) keep "
                          "only those; the threshold is the budget",
               .citation = "Zhang et al. 2024, 'SimLayerKV: A Simple Framework for Layer-Level "
                           "KV Cache Reduction'; kvpress SimLayerKVPress",
               .axis = BudgetAxis::threshold,
               .variants = {},
               .params = {integer("n_last", &SimLayerKvParams::n_last, 1, kUnbounded,
                                  "last queries whose attention decides laziness"),
                          integer("n_recent", &SimLayerKvParams::n_recent, 2, kUnbounded,
                                  "recent tokens in the test (lazy layers keep n_recent - n_last; "
                                  "must exceed n_last)"),
                          integer("n_initial", &SimLayerKvParams::n_initial, 0, kUnbounded,
                                  "initial tokens in the test, kept by lazy layers")},
               .is_scorer = false,
               .typed_defaults = plain<SimLayerKvParams>(),
               .check_params = [](const MethodParams& all) -> std::optional<ParamProblem> {
                 const auto& p = std::get<SimLayerKvParams>(all);
                 if (p.n_recent > p.n_last) return std::nullopt;
                 return ParamProblem{"n_recent", "must be greater than n_last (" +
                                                     std::to_string(p.n_last) +
                                                     "): a lazy layer keeps the last n_recent - "
                                                     "n_last tokens"};
               },
               .fixed_compression = {},
               .larger_threshold_keeps_more = true});
  {
    const Names<KvzipVariant> kvzip_variants{{"kvzip", KvzipVariant::kvzip},
                                             {"kvzip_plus", KvzipVariant::kvzip_plus}};
    c.push_back(
        {.id = "kvzip",
         .summary = "max attention from a context-reconstruction pass, one budget over all layers",
         .citation = "Kim et al. 2025, 'KVzip: Query-Agnostic KV Cache Compression with Context "
                     "Reconstruction'; kvpress KVzipPress",
         .axis = BudgetAxis::ratio,
         .variants = variant_names(kvzip_variants),
         .params = {boolean("layerwise", &KvzipParams::layerwise,
                            "prune the same share in every layer (else one top-k over all layers)"),
                    integer("n_sink", &KvzipParams::n_sink, 0, kUnbounded,
                            "first positions always kept"),
                    integer("chunk_size", &KvzipParams::chunk_size, 1, kUnbounded,
                            "context tokens reconstructed per pass")},
         .is_scorer = false,
         .typed_defaults = with_variants(&KvzipParams::variant, kvzip_variants)});
  }
  {
    const Names<KvzipVariant> restorekv_variants{{"restorekv", KvzipVariant::kvzip},
                                                 {"restorekv_plus", KvzipVariant::kvzip_plus}};
    c.push_back(
        {.id = "restorekv",
         .summary = "KVzip's scores at the budget-matched ratio cr + n/L, plus n restore rows from "
                    "a LoRA pass over learned embeddings (from files)",
         .citation = "'RestoreKV' (arXiv 2608.01247); kvpress RestoreKVPress",
         .axis = BudgetAxis::ratio,
         .variants = variant_names(restorekv_variants),
         .params = {boolean("layerwise", &RestoreKvParams::layerwise,
                            "prune the same share in every layer (else one top-k over all layers)"),
                    integer("n_sink", &RestoreKvParams::n_sink, 0, kUnbounded,
                            "first positions always kept"),
                    integer("chunk_size", &RestoreKvParams::chunk_size, 1, kUnbounded,
                            "context tokens reconstructed per pass"),
                    file_path(
                        "restore_embeddings", &RestoreKvParams::restore_embeddings,
                        "safetensors file with restore_embeddings [n, hidden] (kvpress's "
                        "hub higokri/RestoreKV-<model>[_plus] restore_embeddings.safetensors)",
                        check_restore_embeddings_file),
                    directory_path("adapter", &RestoreKvParams::adapter,
                                   "PEFT LoRA adapter directory (adapter_config.json, "
                                   "adapter_model.safetensors) trained with those embeddings",
                                   {"adapter_config.json", "adapter_model.safetensors"},
                                   check_restorekv_adapter_dir)},
         .is_scorer = false,
         .typed_defaults = with_variants(&RestoreKvParams::variant, restorekv_variants)});
  }
  c.push_back(
      {.id = "kvgrad",
       .summary = "KVzip's reconstruction attention times ||v W_O|| times the gradient norm of the "
                  "chunk's squared last hidden states (a backward pass)",
       .citation = "'KVgrad' (OpenReview cg1wTCJjjk); kvpress KVgradPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {boolean("layerwise", &KvgradParams::layerwise,
                          "prune the same share in every layer (else one top-k over all layers)"),
                  integer("n_sink", &KvgradParams::n_sink, 0, kUnbounded,
                          "first positions always kept"),
                  integer("chunk_size", &KvgradParams::chunk_size, 1, kUnbounded,
                          "context tokens reconstructed and back-propagated per pass")},
       .is_scorer = false,
       .typed_defaults = plain<KvgradParams>()});
  {
    ParamSpec k = integer("kernel_size", &CakeParams::kernel_size, 1, 255,
                          "average pooling of the eviction indicator");
    k.odd_only = true;
    c.push_back(
        {.id = "cake",
         .summary = "layer budgets from window-attention dispersion (entropy x variance), "
                    "attention mean + variance inside each layer",
         .citation = "Qin et al. 2025, 'CAKE: Cascading and Adaptive KV Cache Eviction with Layer "
                     "Preferences' (ICLR); official code antgroup/cakekv",
         .axis = BudgetAxis::ratio,
         .variants = {},
         .params = {integer("window", &CakeParams::window, 2, kUnbounded,
                            "observation window (always kept; at least 2 rows for the variance)"),
                    std::move(k),
                    real("tau1", &CakeParams::tau1, 0.01, 100, false,
                         "temperature of the entropy in the layer preference"),
                    real("tau2", &CakeParams::tau2, 0.01, 100, false,
                         "temperature of the variance in the layer preference"),
                    real("gamma", &CakeParams::gamma, 0, kUnbounded, false,
                         "weight of the attention variance in the eviction indicator")},
         .is_scorer = false,
         .typed_defaults = plain<CakeParams>()});
  }
  c.push_back({.id = "squeezeattention",
               .summary = "layer budgets from the attention block's cosine effect (3-means), "
                          "any scorer inside each layer",
               .citation = "Wang et al. 2025, 'SqueezeAttention: 2D Management of KV-Cache in LLM "
                           "Inference via Layer-wise Optimal Budget' (ICLR); official code "
                           "hetailang/SqueezeAttention",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {scorer_ref(&SqueezeAttentionParams::scorer),
                          real("class3_share", &SqueezeAttentionParams::class3_share, 0, 1, false,
                               "budget of the least important layer group, as a share of the "
                               "cell's per-layer budget")},
               .is_scorer = false,
               .typed_defaults = plain<SqueezeAttentionParams>()});
  c.push_back(
      {.id = "non_causal_attention",
       .summary = "chunked non-causal attention received by each key times its value norm",
       .citation = "Chari & Van Durme 2025, 'Compactor'; kvpress NonCausalAttnPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {integer("chunk_size", &NonCausalAttentionParams::chunk_size, 1, kUnbounded,
                          "queries and keys attend only within chunks of this many "
                          "positions")},
       .is_scorer = true,
       .typed_defaults = plain<NonCausalAttentionParams>()});
  c.push_back(
      {.id = "leverage",
       .summary = "approximate leverage of the pre-RoPE keys under a Gaussian sketch",
       .citation = "Chari & Van Durme 2025, 'Compactor'; kvpress LeverageScorePress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {integer("sketch_dimension", &LeverageParams::sketch_dimension, 1, kUnbounded,
                          "columns of the Gaussian sketch (Philox keyed by the cell)")},
       .is_scorer = true,
       .typed_defaults = plain<LeverageParams>()});
  c.push_back({.id = "compactor",
               .summary = "leverage blended with non-causal attention, first and last tokens kept",
               .citation = "Chari & Van Durme 2025, 'Compactor'; kvpress CompactorPress",
               .axis = BudgetAxis::ratio,
               .variants = variant_names(kCompactorVariants),
               .params = {integer("sink_size_start", &CompactorParams::sink_size_start, 0,
                                  kUnbounded, "first positions always kept"),
                          integer("sink_size_end", &CompactorParams::sink_size_end, 0, kUnbounded,
                                  "last positions always kept"),
                          integer("chunk_size", &CompactorParams::chunk_size, 1, kUnbounded,
                                  "chunk of the non-causal attention"),
                          integer("sketch_dimension", &CompactorParams::sketch_dimension, 1,
                                  kUnbounded, "columns of the leverage sketch"),
                          real("blending", &CompactorParams::blending, 0, kUnbounded, false,
                               "weight of the leverage scores (variant fixed_blending; the kvpress "
                               "variant uses the cell's compression ratio)")},
               .is_scorer = true,
               .typed_defaults = with_variants(&CompactorParams::variant, kCompactorVariants)});
  c.push_back({.id = "cap",
               .summary = "value leverage under query-aligned capacity weights (CAPKV)",
               .citation = "CAPKV, arXiv 2604.25975; kvpress CapPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {real("tau", &CapParams::tau, 0, kUnbounded, false,
                               "temperature of the query-key alignment weights"),
                          integer("n_future_positions", &CapParams::n_future_positions, 1,
                                  kUnbounded, "future positions of the averaged RoPE rotation"),
                          integer("n_sink", &CapParams::n_sink, 0, kUnbounded,
                                  "first positions excluded from scoring and kept"),
                          real("epsilon", &CapParams::epsilon, 0, kUnbounded, false,
                               "added to the weights before the square root")},
               .is_scorer = true,
               .typed_defaults = plain<CapParams>()});
  {
    // Group "wrappers": kvpress 0.5.5's wrapper presses (methods/per_layer_compression.h,
    // composed.h, key_rerotation.h, chunk.h, entropy_gated_chunkkv.h, critical_adakv.h). List
    // parameters are TOML arrays kept as canonical strings (catalog.h, param_lists.h).
    const auto compression_ratio_list = [](std::string doc, auto assign_ratios) {
      ParamSpec spec{.name = "compression_ratios",
                     .type = ParamType::real_list,
                     .doc = std::move(doc),
                     .min = 0,
                     .max = 1,
                     .max_exclusive = true};
      spec.assign = [assign_ratios](MethodParams& all, const ParamValue& value) {
        assign_ratios(
            all, parse_real_list(std::get<std::string>(value)).value_or(std::vector<double>{}));
      };
      return spec;
    };
    MethodSpec per_layer{
        .id = "per_layer_compression",
        .summary = "a scorer's top-k with one compression ratio per layer",
        .citation = "kvpress PerLayerCompressionPress",
        .axis = BudgetAxis::ratio,
        .variants = {},
        .params = {scorer_ref(&PerLayerCompressionParams::scorer),
                   compression_ratio_list(
                       "compression ratio of each layer, in layer order (one per layer of every "
                       "model of the grid); the cells' compression must be their mean",
                       [](MethodParams& all, std::vector<double> ratios) {
                         std::get<PerLayerCompressionParams>(all).compression_ratios =
                             std::move(ratios);
                       })},
        .is_scorer = false,
        .typed_defaults = plain<PerLayerCompressionParams>()};
    per_layer.fixed_compression = [](const MethodParams& p) -> std::optional<double> {
      return mean_compression(std::get<PerLayerCompressionParams>(p).compression_ratios);
    };
    c.push_back(std::move(per_layer));

    ParamSpec presses{.name = "presses",
                      .type = ParamType::method_ref_list,
                      .doc =
                          "names of the scorer method configs applied in turn, each to what "
                          "the previous one kept"};
    presses.assign = [](MethodParams& all, const ParamValue& value) {
      std::get<ComposedParams>(all).presses = split_name_list(std::get<std::string>(value));
    };
    MethodSpec composed{
        .id = "composed",
        .summary = "scorer presses applied in turn, each with its own compression ratio",
        .citation = "kvpress ComposedPress",
        .axis = BudgetAxis::ratio,
        .variants = {},
        .params = {std::move(presses),
                   compression_ratio_list(
                       "compression ratio of each press, in order; the cells' compression must "
                       "be 1 - prod(1 - ratio)",
                       [](MethodParams& all, std::vector<double> ratios) {
                         std::get<ComposedParams>(all).compression_ratios = std::move(ratios);
                       })},
        .is_scorer = false,
        .typed_defaults = plain<ComposedParams>()};
    composed.check_params = [](const MethodParams& all) -> std::optional<ParamProblem> {
      const auto& p = std::get<ComposedParams>(all);
      if (p.compression_ratios.size() == p.presses.size()) return std::nullopt;
      return ParamProblem{"compression_ratios",
                          std::to_string(p.compression_ratios.size()) + " ratio(s) for " +
                              std::to_string(p.presses.size()) + " presses (one per press)"};
    };
    composed.fixed_compression = [](const MethodParams& p) -> std::optional<double> {
      return composed_compression(std::get<ComposedParams>(p).compression_ratios);
    };
    c.push_back(std::move(composed));

    c.push_back({.id = "key_rerotation",
                 .summary = "a scorer's top-k, kept keys re-rotated to contiguous positions",
                 .citation = "kvpress KeyRerotationPress (StreamingLLM's and FINCH's position "
                             "shift)",
                 .axis = BudgetAxis::ratio,
                 .variants = {},
                 .params = {scorer_ref(&KeyRerotationParams::scorer)},
                 .is_scorer = false,
                 .typed_defaults = plain<KeyRerotationParams>()});
    c.push_back({.id = "chunk",
                 .summary = "a scorer's top-k inside each fixed-size chunk independently",
                 .citation = "Corallo & Papotti 2024, 'FINCH'; kvpress ChunkPress",
                 .axis = BudgetAxis::ratio,
                 .variants = {},
                 .params = {scorer_ref(&ChunkParams::scorer),
                            integer("chunk_length", &ChunkParams::chunk_length, 1, kUnbounded,
                                    "tokens per independently compressed chunk")},
                 .is_scorer = false,
                 .typed_defaults = plain<ChunkParams>()});
    MethodSpec entropy_gated{
        .id = "entropy_gated_chunkkv",
        .summary = "ChunkKV whose low-entropy important chunks keep only their best tokens",
        .citation = "Liu et al. 2025, 'ChunkKV'; kvpress EntropyGatedChunkKVPress",
        .axis = BudgetAxis::ratio,
        .variants = {},
        .params = {scorer_ref(&EntropyGatedChunkKvParams::scorer),
                   integer("chunk_length", &EntropyGatedChunkKvParams::chunk_length, 2, kUnbounded,
                           "tokens per chunk (> low_entropy_chunk_length)"),
                   integer("low_entropy_chunk_length",
                           &EntropyGatedChunkKvParams::low_entropy_chunk_length, 1, kUnbounded,
                           "tokens kept of an important low-entropy chunk")},
        .is_scorer = false,
        .typed_defaults = plain<EntropyGatedChunkKvParams>()};
    entropy_gated.check_params = [](const MethodParams& all) -> std::optional<ParamProblem> {
      const auto& p = std::get<EntropyGatedChunkKvParams>(all);
      if (p.chunk_length > p.low_entropy_chunk_length) return std::nullopt;
      return ParamProblem{"chunk_length", std::to_string(p.chunk_length) +
                                              " must be greater than low_entropy_chunk_length (" +
                                              std::to_string(p.low_entropy_chunk_length) + ")"};
    };
    c.push_back(std::move(entropy_gated));
    c.push_back({.id = "critical_adakv",
                 .summary = "CriticalKV's two stages inside AdaKV's head-adaptive layer budget",
                 .citation = "Feng et al. 2025, 'CriticalKV'; kvpress CriticalAdaKVPress",
                 .axis = BudgetAxis::ratio,
                 .variants = {},
                 .params = {scorer_ref(&CriticalAdaKvParams::scorer),
                            real("alpha", &CriticalAdaKvParams::alpha, 0, 1, false,
                                 "safeguard fraction per head"),
                            real("epsilon", &CriticalAdaKvParams::epsilon, 0, kUnbounded, false,
                                 "additive epsilon"),
                            real("first_stage_ratio", &CriticalAdaKvParams::first_stage_ratio, 0, 1,
                                 false, "budget share of stage 1")},
                 .is_scorer = false,
                 .typed_defaults = plain<CriticalAdaKvParams>()});
  }
  {
    ParamSpec k = integer("kernel_size", &HeadKvParams::kernel_size, 1, 255,
                          "pooling kernel over the window scores");
    k.odd_only = true;
    c.push_back(
        {.id = "headkv",
         .summary = "per-head budgets from a head-importance file, SnapKV selection per head",
         .citation = "Fu et al. 2025, 'Not All Heads Matter: A Head-Level KV Cache Compression "
                     "Method with Integrated Retrieval and Reasoning' (HeadKV-R2; "
                     "github.com/FYYFU/HeadKV)",
         .axis = BudgetAxis::ratio,
         .variants = {},
         .params = {file_path("head_scores", &HeadKvParams::head_scores,
                              "head-importance JSON {\"layer-head\": score or [scores]} (the "
                              "official HeadKV format), relative to the manifest",
                              [](const std::string& path) { read_head_scores(path); }),
                    integer("window", &HeadKvParams::window, 1, kUnbounded,
                            "observation window w (always kept)"),
                    std::move(k),
                    choice("pooling", &HeadKvParams::pooling, kPoolings, "pooling kind"),
                    real("beta", &HeadKvParams::beta, 1, kUnbounded, false,
                         "a head keeps b - floor(b/beta) before the shared pool (b = n_kept - w)"),
                    real("temperature", &HeadKvParams::temperature, 0, kUnbounded, false,
                         "normalised head scores are raised to this power")},
         .is_scorer = false,
         .typed_defaults = plain<HeadKvParams>()});
  }
  c.push_back(
      {.id = "lacache",
       .summary = "ladder-shaped positional pattern across layers (query-agnostic)",
       .citation =
           "Shi et al. 2025, 'LaCache: Ladder-Shaped KV Caching for Efficient "
           "Long-Context Modeling of Large Language Models' (github.com/GATECH-EIC/LaCache)",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {integer("span", &LaCacheParams::span, 1, kUnbounded,
                          "layers one ladder step covers"),
                  integer("overlap", &LaCacheParams::overlap, 0, kUnbounded,
                          "layers consecutive ladder steps share (must be < span)"),
                  integer("max_start_size", &LaCacheParams::max_start_size, 1, kUnbounded,
                          "cap of the kept prefix S = min(this, L-N-1, n_kept-N-1)")},
       .is_scorer = false,
       .typed_defaults = plain<LaCacheParams>(),
       .check_params = [](const MethodParams& all) -> std::optional<ParamProblem> {
         const auto& p = std::get<LaCacheParams>(all);
         if (p.overlap >= p.span)
           return ParamProblem{"overlap",
                               "must be less than span (" + std::to_string(p.span) + ")"};
         return std::nullopt;
       }});
  c.push_back({.id = "qfilter",
               .summary = "projection of each key on a learned per-head query filter (from a file)",
               .citation = "Godey et al. 2025, 'Q-Filters'; kvpress QFilterPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {file_path("filters", &QFilterParams::filters,
                                    "safetensors file with q_filters [layers, KV heads, head_dim] "
                                    "(kvpress's hub nthngdy/<model>_qfilt model.safetensors)",
                                    check_qfilter_file)},
               .is_scorer = true,
               .typed_defaults = plain<QFilterParams>()});
  c.push_back({.id = "dms",
               .summary = "evict every entry whose wrapped-scorer score is below the threshold, "
                          "outside the last sliding_window_size positions (prefill form)",
               .citation = "Łańcucki et al. 2025, 'Inference-Time Hyper-Scaling with KV Cache "
                           "Compression' (DMS, arXiv 2506.05345); kvpress DMSPress",
               .axis = BudgetAxis::threshold,
               .variants = {},
               .params = {scorer_ref(&DmsParams::scorer),
                          integer("sliding_window_size", &DmsParams::sliding_window_size, 1,
                                  kUnbounded, "last positions never evicted"),
                          boolean("decoding", &DmsParams::decoding,
                                  "go on while decoding: every later entry (question, generated "
                                  "tokens) is scored on arrival and evicted below the threshold "
                                  "when it leaves the window; needs a per-entry scorer (knorm, "
                                  "kvzap) and the CPU engine")},
               .is_scorer = false,
               .typed_defaults = plain<DmsParams>(),
               .check_params = {},
               .fixed_compression = {},
               .larger_threshold_keeps_more = false,
               .thresholds_of_any_sign = true});
  c.push_back(
      {.id = "kvzap",
       .summary = "KVzip-like importance predicted per KV pair from the attention input by "
                  "a learned per-layer linear or MLP surrogate (from a file)",
       .citation = "'KVzap' (arXiv 2601.07891); kvpress KVzapPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {file_path("model", &KvzapParams::model,
                            "safetensors file of kvpress's KVzapModel: layers.i.weight/bias "
                            "(linear) or layers.i.0.* and layers.i.2.* (mlp) per layer i "
                            "(the hub's nvidia/KVzap-<linear|mlp>-<model> model.safetensors)",
                            check_kvzap_model_file)},
       .is_scorer = true,
       .typed_defaults = plain<KvzapParams>(),
       .per_entry_scorer = true});
  c.push_back(
      {.id = "expected_attention_stats",
       .summary = "expected attention from query statistics precomputed on a corpus (from a file)",
       .citation = "Devoto et al. 2025, 'Expected Attention'; kvpress ExpectedAttentionStatsPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {file_path("statistics", &ExpectedAttentionStatsParams::statistics,
                            "safetensors file with query_mean [layers, heads, head_dim] and "
                            "query_cov [layers, heads, head_dim, head_dim] (kvpress's "
                            "ExpectedAttentionStats model.safetensors)",
                            check_expected_attention_stats_file),
                  integer("n_future_positions", &ExpectedAttentionStatsParams::n_future_positions,
                          1, kUnbounded, "future positions averaged"),
                  integer("n_sink", &ExpectedAttentionStatsParams::n_sink, 0, kUnbounded,
                          "sink tokens excluded and kept"),
                  boolean("use_covariance", &ExpectedAttentionStatsParams::use_covariance,
                          "use the query covariance term"),
                  boolean("use_vnorm", &ExpectedAttentionStatsParams::use_vnorm,
                          "rescale by value norms"),
                  real("epsilon", &ExpectedAttentionStatsParams::epsilon, 0, kUnbounded, false,
                       "additive epsilon")},
       .is_scorer = true,
       .typed_defaults = plain<ExpectedAttentionStatsParams>()});
  c.push_back(
      {.id = "duo_attention",
       .summary = "streaming heads keep sinks + recent tokens, retrieval heads keep all; the "
                  "budget ratio is the share of streaming heads",
       .citation = "Xiao et al. 2025, 'DuoAttention'; kvpress DuoAttentionPress",
       .axis = BudgetAxis::ratio,
       .variants = {"pattern", "on_the_fly"},
       .params = {with_variant_default(
                      file_path("pattern", &DuoAttentionParams::pattern,
                                "DuoAttention's full_attention_heads.tsv [layers x KV heads] "
                                "(variant pattern; on_the_fly reads none)",
                                check_duo_attention_pattern_file),
                      "on_the_fly", std::string()),
                  integer("sink_size", &DuoAttentionParams::sink_size, 0, kUnbounded,
                          "sink tokens a streaming head keeps"),
                  integer("recent_size", &DuoAttentionParams::recent_size, 1, kUnbounded,
                          "recent tokens a streaming head keeps")},
       .is_scorer = false,
       .typed_defaults = [](std::string_view variant) {
         DuoAttentionParams p;
         p.on_the_fly_scoring = variant == "on_the_fly";
         return MethodParams{p};
       }});
  {
    // Group "merging": kvpress 0.5.5 MergingPress (methods/merging.h).
    MethodSpec merging{
        .id = "merging",
        .summary =
            "a scorer's top-k; each evicted value is folded into its most key-similar kept "
            "entry",
        .citation =
            "kvpress MergingPress (after Bolya et al. 2023, 'Token Merging', and Wan et "
            "al. 2024, 'D2O')",
        .axis = BudgetAxis::ratio,
        .variants = {},
        .params = {scorer_ref(&MergingParams::scorer),
                   real("similarity_threshold", &MergingParams::similarity_threshold, 0, 1, false,
                        "least key cosine similarity for an evicted token to merge"),
                   real("merge_fraction", &MergingParams::merge_fraction, 0, 1, false,
                        "share of the evicted tokens (most similar first) that merge, in (0, 1]")},
        .is_scorer = false,
        .typed_defaults = plain<MergingParams>()};
    merging.check_params = [](const MethodParams& all) -> std::optional<ParamProblem> {
      if (std::get<MergingParams>(all).merge_fraction > 0) return std::nullopt;
      return ParamProblem{"merge_fraction", "must be greater than 0 (in (0, 1])"};
    };
    c.push_back(std::move(merging));
  }
  {
    const Names<KvcomposeAggregation> aggregations{{"max", KvcomposeAggregation::max},
                                                   {"mean", KvcomposeAggregation::mean}};
    c.push_back(
        {.id = "kvcompose",
         .summary =
             "attention of a repeated-context pass aggregated per head; structured: every head "
             "of a layer keeps the same count (composite tokens), counts from one ranking "
             "over all layers",
         .citation = "Akulov et al. 2025, 'KVCompose: Efficient Structured KV Cache Compression "
                     "with Composite Tokens' (arXiv 2509.05165); kvpress KVComposePress",
         .axis = BudgetAxis::ratio,
         .variants = {},
         .params = {boolean("structured", &KvcomposeParams::structured,
                            "every head of a layer keeps the same count (else each head its own "
                            "share of one ranking over all heads)"),
                    choice("agg_task", &KvcomposeParams::agg_task, aggregations,
                           "aggregation of a head's attention over the pass's query rows"),
                    choice("agg_group", &KvcomposeParams::agg_group, aggregations,
                           "aggregation over the query heads of a KV group"),
                    choice("agg_head", &KvcomposeParams::agg_head, aggregations,
                           "aggregation over KV heads of the rank-ordered scores (composite "
                           "tokens, structured layer counts)"),
                    boolean("add_v_norm", &KvcomposeParams::add_v_norm,
                            "multiply each token's score by its value vector's norm"),
                    boolean("add_mean_across_heads", &KvcomposeParams::add_mean_across_heads,
                            "add the layer's mean score over KV heads to every head's score"),
                    integer("keep_token_lower_bound", &KvcomposeParams::keep_token_lower_bound, 0,
                            kUnbounded,
                            "least tokens every layer keeps (the best ranks get +1e9)")},
         .is_scorer = false,
         .typed_defaults = plain<KvcomposeParams>()});
  }
  c.push_back(
      {.id = "finch",
       .summary = "SnapKV-style attention of the question's rows (each row weighted by its "
                  "position), optionally chunk by chunk, kept keys re-rotated",
       .citation = "Corallo & Papotti 2024, 'FINCH: Prompt-guided Key-Value Cache Compression for "
                   "Large Language Models' (TACL 12); kvpress FinchPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {integer("window", &FinchParams::window, 1, kUnbounded,
                          "window when the view has no question (query-agnostic): the last "
                          "`window` context positions"),
                  integer("chunk_length", &FinchParams::chunk_length, 0, kUnbounded,
                          "positions per independently compressed chunk (0: no chunking); must "
                          "exceed window / (1 - compression) at run time"),
                  boolean("normalize_scores", &FinchParams::normalize_scores,
                          "weight each window row's attention by its position"),
                  boolean("rerotate_keys", &FinchParams::rerotate_keys,
                          "re-rotate the kept keys to contiguous positions (CPU engine only)")},
       .is_scorer = false,
       .typed_defaults = plain<FinchParams>()});
  {
    // ThinK (methods/think.h): kvpress's ThinKPress reports compression_ratio =
    // key_channel_compression_ratio / 2 and has no other budget, so cells must ask for that.
    MethodSpec think{
        .id = "think",
        .summary =
            "zeroes each KV head's lowest-energy key channels (query-weighted), keeps "
            "every position; the cell's compression is key_channel_compression_ratio / 2",
        .citation =
            "Xu et al. 2024, 'ThinK: Thinner Key Cache by Query-Driven Pruning'; kvpress "
            "ThinKPress",
        .axis = BudgetAxis::ratio,
        .variants = {},
        .params = {real("key_channel_compression_ratio",
                        &ThinkParams::key_channel_compression_ratio, 0, 1, true,
                        "share of each KV head's key channels zeroed (floor(head_dim * ratio)); "
                        "the cells' compression must be ratio / 2"),
                   integer("window_size", &ThinkParams::window_size, 1, kUnbounded,
                           "last queries whose squared entries weight the channels")},
        .is_scorer = false,
        .typed_defaults = plain<ThinkParams>()};
    think.fixed_compression = [](const MethodParams& p) -> std::optional<double> {
      return std::get<ThinkParams>(p).key_channel_compression_ratio / 2.0;
    };
    c.push_back(std::move(think));
  }
  c.push_back(
      {.id = "fastkvzip",
       .summary = "KVzip-style importance predicted by trained per-layer gates from the attention "
                  "input (gates from a file), one budget over all layers",
       .citation = "Kim, Han, Yun 2026, 'Fast KVzip' (arXiv 2601.17668); kvpress FastKVzipPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {file_path("gates", &FastKvzipParams::gates,
                            "safetensors file with the per-layer gates of kvpress's FastKVzipGate "
                            "(tensors i.q_proj.weight, i.q_proj.bias, i.k_proj.weight, "
                            "i.q_norm.weight, i.k_norm.weight, i.k_base, i.b per layer i)",
                            check_fastkvzip_gates_file),
                  boolean("layerwise", &FastKvzipParams::layerwise,
                          "prune the same share in every layer (else one top-k over all layers)"),
                  integer("n_sink", &FastKvzipParams::n_sink, 0, kUnbounded,
                          "first positions always kept"),
                  integer("window_size", &FastKvzipParams::window_size, 1, kUnbounded,
                          "recent positions always kept when L >= 32000"),
                  real("window_ratio", &FastKvzipParams::window_ratio, 0, 1, false,
                       "recent positions always kept when L < 32000: max(1, int(L*ratio))")},
       .is_scorer = false,
       .typed_defaults = plain<FastKvzipParams>()});
  // Group "lukv": kvpress 0.5.5 LUKVPress (methods/lukv.h) and BlockPress over any scorer
  // (methods/block.h).
  c.push_back(
      {.id = "lukv",
       .summary = "per-(layer, KV head) budgets from a precomputed budget curve (a .npy file) "
                  "around a scorer; sink and recent positions protected",
       .citation = "'Predicting Future Utility: Global Combinatorial Optimization for "
                   "Task-Agnostic KV Cache Eviction' (LU-KV, arXiv 2602.08585); kvpress LUKVPress",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {scorer_ref(&LukvParams::scorer),
                  file_path("curve", &LukvParams::curve,
                            "LU-KV budget curve: .npy float32/float64 [99, layers, KV heads], the "
                            "prune ratio of each layer and KV head for target index "
                            "round(100*compression) - 1 (LU-KV's generate_curve.sh); made for the "
                            "model and the wrapped scorer",
                            check_lukv_curve_file),
                  integer("sink", &LukvParams::sink, 0, kUnbounded,
                          "first positions protected (scored max + 1)"),
                  integer("window", &LukvParams::recent_window, 0, kUnbounded,
                          "last positions protected (scored max + 1)")},
       .is_scorer = false,
       .typed_defaults = plain<LukvParams>()});
  c.push_back({.id = "block",
               .summary = "a scorer's top-k taken block by block, each block scored with the "
                          "survivors of the previous ones (scorers reading only keys and values)",
               .citation = "Park et al. 2025, 'KeyDiff' (block prompt processing); kvpress "
                           "BlockPress",
               .axis = BudgetAxis::ratio,
               .variants = {},
               .params = {scorer_ref(&BlockParams::scorer),
                          integer("block_size", &BlockParams::block_size, 1, kUnbounded,
                                  "positions added per step")},
               .is_scorer = false,
               .typed_defaults = plain<BlockParams>()});
  c.push_back(
      {.id = "rkv",
       .summary = "R-KV: window attention (max over a KV head's query heads, mean over the window, "
                  "max-pooled) minus key redundancy (softmax of mean cosine similarity); for "
                  "decode-time compression of reasoning traces",
       .citation = "Cai et al. 2025, 'R-KV: Redundancy-aware KV Cache Compression for Reasoning "
                   "Models' (arXiv 2505.24133); github.com/Zefan-Cai/R-KV rkv/compression/r1_kv.py",
       .axis = BudgetAxis::ratio,
       .variants = {},
       .params = {integer("window", &RkvParams::window, 1, kUnbounded,
                          "observation window α (last α queries; those positions are kept)"),
                  integer("kernel_size", &RkvParams::kernel_size, 1, kUnbounded,
                          "max-pool kernel over the importance (odd)"),
                  real("mix_lambda", &RkvParams::mix_lambda, 0, 1, false,
                       "λ in Z = λ·importance − (1−λ)·redundancy"),
                  real("similarity_threshold", &RkvParams::similarity_threshold, -1, 1, false,
                       "cosine above which a key has a redundant neighbour")},
       .is_scorer = true,
       .typed_defaults = plain<RkvParams>()});
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

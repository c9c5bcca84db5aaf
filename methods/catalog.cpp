#include "methods/catalog.h"

namespace kvaudit::methods {
namespace {

ParamSpec integer(std::string name, std::int64_t def, double min, double max, std::string doc) {
  return ParamSpec{.name = std::move(name),
                   .type = ParamType::integer,
                   .doc = std::move(doc),
                   .default_value = ParamValue{def},
                   .min = min,
                   .max = max};
}

ParamSpec real(std::string name, double def, double min, double max, bool max_exclusive,
               std::string doc) {
  return ParamSpec{.name = std::move(name),
                   .type = ParamType::real,
                   .doc = std::move(doc),
                   .default_value = ParamValue{def},
                   .min = min,
                   .max = max,
                   .max_exclusive = max_exclusive};
}

ParamSpec boolean(std::string name, bool def, std::string doc) {
  return ParamSpec{.name = std::move(name),
                   .type = ParamType::boolean,
                   .doc = std::move(doc),
                   .default_value = ParamValue{def}};
}

ParamSpec choice(std::string name, std::string def, std::vector<std::string> choices,
                 std::string doc) {
  return ParamSpec{.name = std::move(name),
                   .type = ParamType::choice,
                   .doc = std::move(doc),
                   .default_value = ParamValue{std::move(def)},
                   .choices = std::move(choices)};
}

ParamSpec scorer_ref() {
  return ParamSpec{.name = "scorer",
                   .type = ParamType::method_ref,
                   .doc = "name of the method config (in this manifest) whose scores are wrapped"};
}

constexpr double kUnbounded = 0;  // max <= min: no upper bound

std::vector<MethodSpec> build_catalog() {
  std::vector<MethodSpec> c;
  c.push_back({"full", "no eviction: the full-KV reference", "", BudgetAxis::none, {}, {}, false});
  c.push_back({"random",
               "uniform random scores (Philox keyed by cell id)",
               "kvpress RandomPress",
               BudgetAxis::ratio,
               {},
               {},
               true});
  c.push_back({"knorm",
               "s(j) = -||K_j||_2 per KV head, in fp32",
               "Devoto et al. 2024, 'A Simple and Effective L2 Norm-Based Strategy for KV Cache "
               "Compression'; kvpress KnormPress (PR #280: fp32)",
               BudgetAxis::ratio,
               {},
               {},
               true});
  c.push_back({"streaming_llm",
               "keep n_sink first tokens and the most recent ones",
               "Xiao et al. 2024, 'Efficient Streaming Language Models with Attention Sinks'",
               BudgetAxis::ratio,
               {},
               {integer("n_sink", 4, 0, kUnbounded, "number of initial (sink) tokens kept")},
               true});
  {
    MethodSpec m{"snapkv",
                 "observation-window attention, pooled",
                 "Li et al. 2024, 'SnapKV: LLM Knows What You are Looking for Before Generation'",
                 BudgetAxis::ratio,
                 {"kvpress", "original"},
                 {},
                 true};
    ParamSpec w = integer("window", 64, 1, kUnbounded, "observation window w (last w queries)");
    w.variant_default["original"] = ParamValue{std::int64_t{32}};
    ParamSpec k = integer("kernel_size", 5, 1, 255, "pooling kernel over the scores");
    k.odd_only = true;
    k.variant_default["original"] = ParamValue{std::int64_t{7}};
    ParamSpec pool = choice("pooling", "avg", {"avg", "max"}, "pooling kind");
    pool.variant_default["original"] = ParamValue{std::string("max")};
    m.params = {w, k, pool};
    c.push_back(std::move(m));
  }
  c.push_back({"tova",
               "attention of the last query, averaged over all heads",
               "Oren et al. 2024, 'Transformers are Multi-State RNNs'",
               BudgetAxis::ratio,
               {"kvpress", "original"},
               {},
               true});
  c.push_back({"observed_attention",
               "H2O-like: attention column sums / (L - j)",
               "kvpress ObservedAttentionPress",
               BudgetAxis::ratio,
               {},
               {},
               true});
  c.push_back({"h2o",
               "heavy hitters (unnormalised column sums) + recent window",
               "Zhang et al. 2023, 'H2O: Heavy-Hitter Oracle for Efficient Generative Inference'",
               BudgetAxis::ratio,
               {"original"},
               {real("heavy_fraction", 0.5, 0, 1, false,
                     "share of the kept budget given to heavy hitters; the rest is recent")},
               false});
  c.push_back({"expected_attention",
               "attention expected from future query statistics",
               "Devoto et al. 2025, 'Expected Attention'; kvpress ExpectedAttentionPress",
               BudgetAxis::ratio,
               {},
               {integer("n_future_positions", 512, 1, kUnbounded, "future positions averaged"),
                integer("n_sink", 4, 0, kUnbounded, "sink tokens excluded and kept"),
                boolean("use_covariance", true, "use the query covariance term"),
                boolean("use_vnorm", true, "rescale by value norms"),
                real("epsilon", 0.0, 0, kUnbounded, false, "additive epsilon")},
               true});
  {
    MethodSpec m{"keydiff",
                 "negative cosine similarity to the mean normalised key",
                 "Park et al. 2025, 'KeyDiff: Key Similarity-Based KV Cache Eviction'",
                 BudgetAxis::ratio,
                 {"oneshot", "block"},
                 {},
                 true};
    m.params = {integer("block_size", 128, 1, kUnbounded, "block size of the block variant")};
    c.push_back(std::move(m));
  }
  c.push_back({"adakv",
               "head-adaptive budget over any scorer within a layer",
               "Feng et al. 2024, 'Ada-KV'; kvpress AdaKVPress",
               BudgetAxis::ratio,
               {"kvpress", "original"},
               {scorer_ref(), real("alpha", 0.2, 0, 1, false, "safeguard fraction per head")},
               false});
  {
    MethodSpec m{"pyramidkv",
                 "SnapKV scores with a pyramidal per-layer budget",
                 "Cai et al. 2024, 'PyramidKV'; kvpress PyramidKVPress",
                 BudgetAxis::ratio,
                 {},
                 {},
                 true};
    ParamSpec k = integer("kernel_size", 5, 1, 255, "pooling kernel");
    k.odd_only = true;
    m.params = {integer("window", 64, 1, kUnbounded, "observation window"), k,
                integer("beta", 20, 1, kUnbounded, "pyramid steepness")};
    c.push_back(std::move(m));
  }
  c.push_back({"chunkkv",
               "chunk-level selection over any scorer",
               "Liu et al. 2025, 'ChunkKV'; kvpress ChunkKVPress",
               BudgetAxis::ratio,
               {},
               {scorer_ref(), integer("chunk_length", 20, 1, kUnbounded, "tokens per chunk")},
               false});
  c.push_back(
      {"criticalkv",
       "two-stage selection with output-projection value norms",
       "Feng et al. 2025, 'CriticalKV'; kvpress CriticalKVPress",
       BudgetAxis::ratio,
       {},
       {scorer_ref(), real("first_stage_ratio", 0.5, 0, 1, false, "budget share of stage 1"),
        real("epsilon", 1e-4, 0, kUnbounded, false, "additive epsilon")},
       false});
  c.push_back({"defensivekv",
               "defensive aggregation, head-adaptive within a layer",
               "Feng et al. 2025, 'Taming the Fragility of KV Cache Eviction' (DefensiveKV)",
               BudgetAxis::ratio,
               {},
               {integer("window", 32, 1, kUnbounded, "observation window")},
               false});
  c.push_back({"layer_defensivekv",
               "DefensiveKV with one budget across all layers",
               "Feng et al. 2025 (Layer-DefensiveKV)",
               BudgetAxis::ratio,
               {},
               {integer("window", 32, 1, kUnbounded, "observation window")},
               false});
  c.push_back({"refreekv",
               "request-adaptive pruning with threshold T on the last-token attention",
               "ReFreeKV (formerly 'Towards Threshold-Free KV Cache Pruning')",
               BudgetAxis::threshold,
               {},
               {integer("window", 8, 1, kUnbounded, "recent window always kept")},
               false});
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

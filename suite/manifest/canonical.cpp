#include "suite/manifest/canonical.h"

#include <optional>
#include <vector>

#include "methods/param_lists.h"
#include "suite/common/sha256.h"

namespace kvaudit::manifest {
namespace {

using nlohmann::json;

json param_json(const methods::ParamValue& v) {
  return std::visit([](const auto& x) { return json(x); }, v);
}

}  // namespace

json canonical_method(const Manifest& m, const MethodConfig& cfg) {
  json j;
  j["method"] = cfg.method;
  j["variant"] = cfg.variant;
  json params = json::object();
  const methods::MethodSpec* spec = methods::find_method(cfg.method);
  for (const auto& [name, value] : cfg.params) {
    bool is_ref = false;
    std::optional<methods::ParamType> list_type;
    if (spec) {
      for (const auto& p : spec->params) {
        if (p.name == name && p.type == methods::ParamType::method_ref) is_ref = true;
        if (p.name == name && (p.type == methods::ParamType::real_list ||
                               p.type == methods::ParamType::method_ref_list))
          list_type = p.type;
      }
    }
    // List parameters (kept as canonical strings, methods/param_lists.h) as JSON arrays; names
    // inlined as their configurations, like method_ref. No existing manifest has one, so no
    // existing hash changes.
    if (list_type && std::holds_alternative<std::string>(value)) {
      const std::string& text = std::get<std::string>(value);
      json items = json::array();
      if (*list_type == methods::ParamType::real_list) {
        for (const double x : methods::parse_real_list(text).value_or(std::vector<double>{}))
          items.push_back(x);
      } else {
        for (const auto& item : methods::split_name_list(text)) {
          const MethodConfig* ref = m.find_method(item);
          items.push_back(ref ? canonical_method(m, *ref) : json(item));
        }
      }
      params[name] = items;
      continue;
    }
    const MethodConfig* ref = is_ref ? m.find_method(std::get<std::string>(value)) : nullptr;
    params[name] = ref ? canonical_method(m, *ref) : param_json(value);
  }
  j["params"] = params;
  return j;
}

json canonical_full_method() {
  return json{{"method", "full"}, {"params", json::object()}, {"variant", ""}};
}

json canonical_model_identity(const Model& model) {
  return json{{"name", model.name},
              {"format", model.format},
              {"chat_template", model.chat_template},
              {"dtype", model.dtype}};
}

json canonical_benchmark_identity(const Benchmark& b) {
  return json{{"name", b.name}, {"kind", benchmarks::kind_name(b.kind)}, {"length", b.length}};
}

json canonical_grid_decoding(const GridDecoding& d) {
  json j{{"compression_interval", d.compression_interval},
         {"hidden_states_buffer_size", d.hidden_states_buffer_size},
         {"method", d.method},
         {"query_positions", d.query_positions}};
  // Only when present, so the hashes of grids without CAM are what they were before the key.
  if (d.merge_budget) j["merge_budget"] = *d.merge_budget;
  // The target: a fixed size, or (only when given, so the hashes of fixed-size grids do not
  // change) the ratio that replaces it.
  if (d.target_compression_ratio) {
    j["target_compression_ratio"] = *d.target_compression_ratio;
  } else {
    j["target_size"] = d.target_size;
  }
  return j;
}

json canonical_certification(const Certification& c) {
  json j{{"name", c.name},
         {"grid", c.grid},
         {"benchmark", c.benchmark},
         {"method", c.method},
         {"protocol", c.protocol},
         {"backend", c.backend},
         {"candidates", c.candidates},
         {"tau", c.tau},
         {"epsilon", c.epsilon},
         {"delta", c.delta},
         {"calibration", c.calibration},
         {"test", c.test}};
  // The contract kind, each field only when it differs from the original contract, so that the
  // hash of every manifest without these keys is what it was before they existed.
  if (c.risks != std::vector<std::string>{"violation"}) j["risks"] = c.risks;
  if (c.has_risk("mean_loss")) j["bound"] = c.bound;
  if (c.has_risk("mean_loss") && c.has_risk("violation")) j["loss_epsilon"] = c.loss_epsilon;
  if (c.procedure != "fixed_sequence") j["procedure"] = c.procedure;
  if (c.procedure == "fixed_sequence_multistart") j["starts"] = c.starts;
  if (c.per_task) j["per_task"] = true;
  if (c.sequential) j["sequential"] = true;
  return j;
}

json canonical_json(const Manifest& m) {
  json j;
  j["kvaudit_manifest_schema"] = kCanonicalSchema;
  j["study"] = json{{"name", m.study.name}, {"seed", m.study.seed}};
  json models = json::array();
  for (const auto& model : m.models) {
    json mj = canonical_model_identity(model);
    mj["path"] = model.path;
    models.push_back(mj);
  }
  j["models"] = models;
  json benches = json::array();
  for (const auto& b : m.benchmarks) {
    json bj = canonical_benchmark_identity(b);
    bj["tasks"] = b.tasks;
    bj["instances"] = b.instances;
    if (b.kind == benchmarks::BenchmarkKind::ruler) {
      bj["essay"] = b.essay;
      bj["squad"] = b.squad;
      bj["hotpotqa"] = b.hotpotqa;
      // Only when set, so that the hash of every manifest without it is what it was before.
      if (!b.generation_tokenizer.empty()) bj["generation_tokenizer"] = b.generation_tokenizer;
    } else {
      bj["data_dir"] = b.data_dir;
    }
    benches.push_back(bj);
  }
  j["benchmarks"] = benches;
  json methods_j = json::object();
  for (const auto& cfg : m.methods) methods_j[cfg.name] = canonical_method(m, cfg);
  j["methods"] = methods_j;
  json grids = json::array();
  for (const auto& g : m.grids) {
    json gj{{"name", g.name},
            {"benchmarks", g.benchmarks},
            {"models", g.models},
            {"methods", g.methods},
            {"protocols", g.protocols},
            {"backends", g.backends},
            {"thresholds", g.thresholds}};
    gj["ratio_kind"] = !g.ratio_kind                             ? ""
                       : *g.ratio_kind == RatioKind::compression ? "compression"
                                                                 : "retention";
    gj["ratios"] = g.ratios;
    // Only grids that compress while decoding have the key: other manifests keep their hash.
    if (g.decoding) gj["decoding"] = canonical_grid_decoding(*g.decoding);
    grids.push_back(gj);
  }
  j["grids"] = grids;
  json certs = json::array();
  for (const auto& c : m.certifications) certs.push_back(canonical_certification(c));
  j["certification"] = certs;
  json fams = json::array();
  for (const auto& f : m.statistics.families)
    fams.push_back(json{{"name", f.name}, {"analysis", f.analysis}, {"over", f.over}});
  j["statistics"] = json{{"bootstrap_resamples", m.statistics.bootstrap_resamples},
                         {"seed", m.statistics.seed},
                         {"alpha", m.statistics.alpha},
                         {"families", fams}};
  return j;
}

std::string canonical_text(const Manifest& m) {
  // Compact, sorted keys (nlohmann::json objects are ordered maps), UTF-8 kept as is.
  return canonical_json(m).dump(-1, ' ', false, json::error_handler_t::strict);
}

std::string manifest_sha256(const Manifest& m) { return sha256_hex(canonical_text(m)); }

std::string params_digest(const json& canonical_method) {
  return id_hex(digest_prefix_u64(sha256(canonical_method.dump())));
}

}  // namespace kvaudit::manifest

#include "suite/manifest/plan_summary.h"

#include <cstdio>
#include <set>

#include "suite/manifest/canonical.h"
#include "suite/manifest/number_format.h"

namespace kvaudit::manifest {
namespace {

using nlohmann::json;

bool is_trivial_baseline(const Manifest& m, const Cell& c) {
  if (c.method < 0) return false;
  const std::string& id = m.methods[static_cast<std::size_t>(c.method)].method;
  return id == "random" || id == "knorm" || id == "streaming_llm";
}

std::string dimension_value(const Manifest& m, const Unit& u, const Cell& c,
                            const std::string& dim) {
  if (dim == "model") return m.models[u.model].name;
  if (dim == "backend") return std::string(attention_backend_name(u.attention_backend));
  if (dim == "benchmark") return m.benchmarks[u.benchmark].name;
  if (dim == "task") return m.benchmarks[u.benchmark].name + "/" + unit_task(m, u);
  if (dim == "protocol") return std::string(protocol_name(c.protocol));
  if (dim == "method") return cell_method_name(m, c);
  if (dim == "budget")
    return std::string(budget_kind_name(c.budget_kind)) + "=" + format_number(c.budget);
  return "";
}

std::int64_t family_m(const Manifest& m, const Expansion& ex, const Family& f) {
  std::set<std::string> tuples;
  if (f.analysis == "certification_task_risk") {
    // One comparison per (certification block's model, method, task) ...
    for (const auto& c : m.certifications) {
      const Grid* g = m.find_grid(c.grid);
      const Benchmark* b = m.find_benchmark(c.benchmark);
      for (const auto& model : g->models) {
        for (const auto& task : b->tasks) {
          std::string key;
          for (const auto& dim : f.over) {
            std::string v;
            if (dim == "model")
              v = model;
            else if (dim == "method")
              v = c.method;
            else if (dim == "task")
              v = b->name + "/" + task;
            else if (dim == "benchmark")
              v = b->name;
            else if (dim == "backend")
              v = c.backend;
            else if (dim == "protocol")
              v = c.protocol;
            else if (dim == "budget")
              v = "selected";
            key += v + '\x1f';
          }
          tuples.insert(key);
        }
      }
    }
    return static_cast<std::int64_t>(tuples.size());
  }
  for (const Cell& c : ex.cells) {
    const bool full = c.method < 0;
    if (f.analysis == "protocol_gap" && full) continue;
    if (f.analysis == "baseline_wins" && (full || is_trivial_baseline(m, c))) continue;
    if (f.analysis == "backend_confound" && !full) continue;
    const Unit& u = ex.units[c.unit];
    std::string key;
    for (const auto& dim : f.over) key += dimension_value(m, u, c, dim) + '\x1f';
    tuples.insert(key);
  }
  return static_cast<std::int64_t>(tuples.size());
}

std::string with_commas(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  std::string s(buf), out;
  const std::size_t n = s.size();
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(s[i]);
    const std::size_t left = n - 1 - i;
    if (left > 0 && left % 3 == 0 && s[i] != '-') out.push_back(',');
  }
  return out;
}
std::string with_commas(std::int64_t v) { return with_commas(static_cast<double>(v)); }

std::string padded(const std::string& s, std::size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

PlanSummary summarize(const Manifest& m, const Expansion& ex) {
  PlanSummary s;
  s.manifest_sha256 = manifest_sha256(m);
  s.units = static_cast<std::int64_t>(ex.units.size());
  s.cells = static_cast<std::int64_t>(ex.cells.size());
  for (const Unit& u : ex.units) {
    auto& mb = s.by_model_backend[{m.models[u.model].name,
                                   std::string(attention_backend_name(u.attention_backend))}];
    mb.first += 1;
    mb.second += u.n_cells;
    const double len = static_cast<double>(m.benchmarks[u.benchmark].length);
    s.prefill_tokens += len;
    s.token_cells += len * u.n_cells;
  }
  for (const Cell& c : ex.cells) {
    s.cells_by_protocol[std::string(protocol_name(c.protocol))] += 1;
    s.cells_by_method[cell_method_name(m, c)] += 1;
    const Unit& u = ex.units[c.unit];
    const Benchmark& b = m.benchmarks[u.benchmark];
    s.max_decode_tokens += benchmarks::find_task(b.kind, b.tasks[u.task])->max_new_tokens;
  }
  for (const auto& c : m.certifications) {
    CertificationSize cs;
    cs.name = c.name;
    cs.models = m.find_grid(c.grid)->models;
    cs.tasks = static_cast<std::int64_t>(m.find_benchmark(c.benchmark)->tasks.size());
    cs.n_calibration = cs.tasks * c.calibration;
    cs.n_test = cs.tasks * c.test;
    s.certifications.push_back(cs);
  }
  for (const auto& f : m.statistics.families) {
    FamilySize fs{f.name, f.analysis, f.over, family_m(m, ex, f), m.statistics.alpha, 0};
    fs.per_comparison = fs.m > 0 ? fs.alpha / static_cast<double>(fs.m) : fs.alpha;
    s.families.push_back(fs);
  }
  return s;
}

void print_plan(std::ostream& os, const Manifest& m, const Expansion& ex, const PlanSummary& s) {
  os << "study      " << m.study.name << "  (seed " << m.study.seed << ")\n";
  os << "manifest   " << m.file.string() << "\n";
  os << "sha256     " << s.manifest_sha256 << "\n";
  os << "output     "
     << std::filesystem::absolute(m.resolve(m.study.output_dir)).lexically_normal().string()
     << "\n\n";

  os << "benchmarks\n";
  for (const auto& b : m.benchmarks) {
    const auto n = static_cast<std::int64_t>(b.tasks.size());
    os << "  " << padded(b.name, 16) << padded(std::string(benchmarks::kind_name(b.kind)), 10) << n
       << " tasks x " << b.instances << " instances = " << with_commas(n * b.instances)
       << " instances";
    if (b.kind == benchmarks::BenchmarkKind::ruler) {
      os << " at " << b.length << " tokens\n";
      if (!b.generation_tokenizer.empty())
        os << "  " << padded("", 26) << "sized with generation_tokenizer "
           << m.resolve(b.generation_tokenizer).string()
           << " (no chat template), not the models' own: see the tokenizer check\n";
    } else {
      os << ", prompts truncated to " << b.length << " tokens\n";
    }
  }

  os << "\ngrids (a unit is one prefill: model x attention backend x benchmark instance)\n";
  for (const auto& g : ex.grids) {
    os << "  " << g.grid << ": " << g.models << " models x " << g.backends
       << " attention backends x " << with_commas(g.instances)
       << " instances = " << with_commas(g.units) << " units\n";
    std::string inner;
    if (g.ratio_methods) {
      const Grid* grid = m.find_grid(g.grid);
      inner += std::to_string(g.ratio_methods) + " methods x " + std::to_string(g.ratios) + " " +
               (*grid->ratio_kind == RatioKind::compression ? "compression" : "retention") +
               " ratios";
    }
    if (g.threshold_methods) {
      if (!inner.empty()) inner += " + ";
      inner += std::to_string(g.threshold_methods) + " threshold methods x " +
               std::to_string(g.thresholds) + " thresholds";
    }
    if (!inner.empty()) inner += " + ";
    inner += "1 full-KV";
    os << "    cells per unit = (" << inner << ") x " << g.protocols
       << " protocols = " << g.cells_per_unit << "\n";
    os << "    cells = " << with_commas(g.units) << " x " << g.cells_per_unit << " = "
       << with_commas(g.cells);
    if (g.backends > 1) {
      os << "  (per attention backend: " << with_commas(g.instances) << " x " << g.models
         << " models x " << g.cells_per_unit << " = "
         << with_commas(g.instances * g.models * g.cells_per_unit) << ")";
    }
    os << "\n";
    if (const Grid* grid = m.find_grid(g.grid); grid != nullptr && grid->decoding) {
      const GridDecoding& d = *grid->decoding;
      os << "    decoding: every cell also compresses while decoding: " << d.method << " every "
         << d.compression_interval << " steps down to ";
      if (d.target_compression_ratio) {
        os << "max(1, int(T x (1 - " << format_number(*d.target_compression_ratio)
           << "))) (T = tokens seen)";
      } else {
        os << d.target_size;
      }
      os << " entries per (layer, KV head) (buffer " << d.hidden_states_buffer_size << ", "
         << d.query_positions << ")";
      if (d.merge_budget) {
        os << "; CAM: evicted values merged into up to " << *d.merge_budget << " kept neighbours";
      }
      os << "\n";
    }
    if (g.reuse_units > 0) {
      os << "    reuse: " << with_commas(g.reuse_units)
         << " reuse units (one compression per context, every question of the context answered "
            "on it; a reuse cell writes one record per question)\n";
    }
  }
  os << "\ntotal      " << with_commas(s.units) << " units, " << with_commas(s.cells) << " cells";
  if (ex.overlapping_cells)
    os << " (" << with_commas(ex.overlapping_cells) << " cells shared by grids counted once)";
  os << "\n\n";

  os << "cells by model and attention backend\n";
  os << "  " << padded("model", 30) << padded("attention backend", 19) << padded("units", 10)
     << "cells\n";
  for (const auto& [key, v] : s.by_model_backend) {
    os << "  " << padded(key.first, 30) << padded(key.second, 19)
       << padded(with_commas(v.first), 10) << with_commas(v.second) << "\n";
  }
  os << "cells by protocol\n";
  for (const auto& [k, v] : s.cells_by_protocol)
    os << "  " << padded(k, 39) << with_commas(v) << "\n";
  os << "cells by method\n";
  for (const auto& [k, v] : s.cells_by_method)
    os << "  " << padded(k, 39) << with_commas(v) << "\n";

  os << "\ncost estimate (relative; sharding uses it)\n";
  os << "  prefill tokens (one prefill per unit)     " << sci(s.prefill_tokens) << "\n";
  os << "  context tokens x cells                    " << sci(s.token_cells) << "\n";
  os << "  decode tokens, upper bound                " << sci(s.max_decode_tokens) << "\n";

  if (!m.certifications.empty()) {
    os << "\ncertification (per model; candidates in preregistered test order)\n";
    for (std::size_t i = 0; i < m.certifications.size(); ++i) {
      const auto& c = m.certifications[i];
      const auto& cs = s.certifications[i];
      os << "  " << c.name << ": " << c.method << " on " << c.benchmark << ", " << c.protocol
         << ", " << c.backend << "; tau=" << format_number(c.tau)
         << " epsilon=" << format_number(c.epsilon) << " delta=" << format_number(c.delta) << "\n";
      os << "    models " << cs.models.size() << "; n = " << cs.tasks << " tasks x "
         << c.calibration << " = " << cs.n_calibration << " calibration, " << cs.tasks << " x "
         << c.test << " = " << cs.n_test << " test; candidates:";
      for (double v : c.candidates) os << " " << format_number(v);
      os << "\n";
    }
  }
  if (!s.families.empty()) {
    os << "\nBonferroni families (alpha = " << format_number(m.statistics.alpha) << " each)\n";
    for (const auto& f : s.families) {
      std::string over;
      for (const auto& d : f.over) over += (over.empty() ? "" : " x ") + d;
      os << "  " << padded(f.name, 24) << padded(f.analysis, 26) << "over " << padded(over, 34)
         << "m = " << f.m << ", per comparison " << sci(f.per_comparison) << "\n";
    }
  }
}

json summary_json(const Expansion& ex, const PlanSummary& s) {
  json j;
  j["units"] = s.units;
  j["cells"] = s.cells;
  json grids = json::array();
  for (const auto& g : ex.grids) {
    grids.push_back(json{{"grid", g.grid},
                         {"models", g.models},
                         {"backends", g.backends},
                         {"instances", g.instances},
                         {"units", g.units},
                         {"cells_per_unit", g.cells_per_unit},
                         {"cells", g.cells}});
  }
  j["grids"] = grids;
  j["overlapping_cells"] = ex.overlapping_cells;
  json mb = json::array();
  for (const auto& [key, v] : s.by_model_backend)
    mb.push_back(json{
        {"model", key.first}, {"backend", key.second}, {"units", v.first}, {"cells", v.second}});
  j["by_model_backend"] = mb;
  j["cells_by_protocol"] = s.cells_by_protocol;
  j["cells_by_method"] = s.cells_by_method;
  j["cost"] = json{{"prefill_tokens", s.prefill_tokens},
                   {"token_cells", s.token_cells},
                   {"max_decode_tokens", s.max_decode_tokens}};
  json fams = json::array();
  for (const auto& f : s.families)
    fams.push_back(json{{"name", f.name},
                        {"analysis", f.analysis},
                        {"over", f.over},
                        {"m", f.m},
                        {"alpha", f.alpha},
                        {"per_comparison_alpha", f.per_comparison}});
  j["bonferroni_families"] = fams;
  return j;
}

}  // namespace kvaudit::manifest

#include "suite/manifest/expansion.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/manifest/canonical.h"

namespace kvaudit::manifest {
namespace {

using nlohmann::json;

std::uint64_t id_of(const std::string& tuple) { return digest_prefix_u64(sha256(tuple)); }

std::string dump(const json& j) { return j.dump(); }

std::string budget_json(BudgetKind kind, double value) {
  if (kind == BudgetKind::none) return R"({"kind":"none"})";
  return dump(json{{"kind", budget_kind_name(kind)}, {"value", value}});
}

// The unit tuple without its instance: {"backend":..,"benchmark":..,"instance":  + N + ,"model":..}
struct UnitPrefix {
  std::string head;  // up to and including "instance":
  std::string tail;  // from ,"model": to the end
};

// The tuples' keys are fixed ("backend" names the attention backend): they define the ids.
// A reuse unit's tuple has "reuse": true between "model" and "task" (keys in name order).
UnitPrefix unit_prefix(const Manifest& m, std::size_t model, std::size_t bench, std::size_t task,
                       AttentionBackend backend, bool reuse) {
  const Benchmark& b = m.benchmarks[bench];
  UnitPrefix p;
  p.head = R"({"backend":)" + dump(json(std::string(attention_backend_name(backend)))) +
           R"(,"benchmark":)" + dump(canonical_benchmark_identity(b)) + R"(,"instance":)";
  p.tail = R"(,"model":)" + dump(canonical_model_identity(m.models[model])) +
           (reuse ? R"(,"reuse":true)" : "") + R"(,"task":)" + dump(json(b.tasks[task])) + "}";
  return p;
}

// One (method, budget) pair of a grid with its canonical texts, computed once per grid.
struct MethodBudget {
  std::int16_t method;  // index into Manifest::methods; -1 = full-KV
  BudgetKind kind;
  double budget;
  const std::string* method_canon;
  std::string budget_text;
};

// `decoding`: "" (no decode-time compression; the key is absent, so such cells keep the ids they
// always had) or the decoding_text of the cell's grid.
std::string cell_tuple_from(const std::string& budget, const std::string& method, Protocol protocol,
                            const std::string& unit, const std::string& decoding = "") {
  return R"({"budget":)" + budget + (decoding.empty() ? "" : R"(,"decoding":)" + decoding) +
         R"(,"method":)" + method + R"(,"protocol":)" +
         dump(json(std::string(protocol_name(protocol)))) + R"(,"unit":)" + unit + "}";
}

// A grid's decoding table as it enters cell tuples: its method's configuration inlined (content,
// as the cell's own method is), "" when the grid has none.
std::string decoding_text(const Manifest& m, std::int16_t grid) {
  if (grid < 0 || !m.grids[static_cast<std::size_t>(grid)].decoding) return "";
  const GridDecoding& d = *m.grids[static_cast<std::size_t>(grid)].decoding;
  json j = canonical_grid_decoding(d);
  const MethodConfig* cfg = m.find_method(d.method);
  j["method"] = cfg != nullptr ? canonical_method(m, *cfg) : json(d.method);
  return dump(j);
}

template <typename T>
std::size_t index_by_name(const std::vector<T>& v, const std::string& name) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i].name == name) return i;
  return v.size();
}

}  // namespace

const char* budget_kind_name(BudgetKind k) {
  switch (k) {
    case BudgetKind::none:
      return "none";
    case BudgetKind::compression:
      return "compression";
    case BudgetKind::retention:
      return "retention";
    case BudgetKind::threshold:
      return "threshold";
  }
  return "none";
}

std::string unit_tuple(const Manifest& m, const Unit& u) {
  const UnitPrefix p = unit_prefix(m, u.model, u.benchmark, u.task, u.attention_backend, u.reuse);
  return p.head + std::to_string(u.instance) + p.tail;
}

std::string cell_tuple(const Manifest& m, const Unit& u, const Cell& c) {
  const std::string method =
      c.method < 0 ? dump(canonical_full_method())
                   : dump(canonical_method(m, m.methods[static_cast<std::size_t>(c.method)]));
  return cell_tuple_from(budget_json(c.budget_kind, c.budget), method, c.protocol, unit_tuple(m, u),
                         decoding_text(m, c.decoding_grid));
}

std::string selection_tuple(const Manifest& m, const Unit& u, const Cell& c) {
  const Benchmark& b = m.benchmarks[u.benchmark];
  const std::string unit = R"({"benchmark":)" + dump(canonical_benchmark_identity(b)) +
                           R"(,"instance":)" + std::to_string(u.instance) + R"(,"model":)" +
                           dump(canonical_model_identity(m.models[u.model])) +
                           (u.reuse ? R"(,"reuse":true)" : "") + R"(,"task":)" +
                           dump(json(b.tasks[u.task])) + "}";
  const std::string method =
      c.method < 0 ? dump(canonical_full_method())
                   : dump(canonical_method(m, m.methods[static_cast<std::size_t>(c.method)]));
  return cell_tuple_from(budget_json(c.budget_kind, c.budget), method, c.protocol, unit,
                         decoding_text(m, c.decoding_grid));
}

std::uint64_t selection_key(const Manifest& m, const Unit& u, const Cell& c) {
  return id_of(selection_tuple(m, u, c));
}

std::string cell_method_name(const Manifest& m, const Cell& c) {
  return c.method < 0 ? "full" : m.methods[static_cast<std::size_t>(c.method)].name;
}

std::string unit_task(const Manifest& m, const Unit& u) {
  return m.benchmarks[u.benchmark].tasks[u.task];
}

double estimated_cells(const Manifest& m) {
  double total = 0;
  for (const Grid& g : m.grids) {
    double instances = 0;
    for (const auto& b : g.benchmarks) {
      const Benchmark* bench = m.find_benchmark(b);
      instances += static_cast<double>(bench->tasks.size()) * static_cast<double>(bench->instances);
    }
    const double per_unit =
        (static_cast<double>(g.methods.size()) *
             static_cast<double>(std::max(g.ratios.size(), g.thresholds.size())) +
         1) *
        static_cast<double>(g.protocols.size());
    total += static_cast<double>(g.models.size() * g.backends.size()) * instances * per_unit;
  }
  return total;
}

Expansion expand(const Manifest& m) {
  if (const double n = estimated_cells(m); n > static_cast<double>(kMaxCells)) {
    throw InputError(m.file.string() + ": the grids expand to about " +
                     std::to_string(static_cast<long long>(n)) +
                     " cells, more than one study may " + "plan (" + std::to_string(kMaxCells) +
                     "); split it into several studies");
  }
  Expansion ex;
  // Splits per (benchmark, task) from the certification blocks (validated to agree).
  std::map<std::size_t, std::pair<std::int64_t, std::int64_t>> split_of;
  for (const auto& c : m.certifications)
    split_of[index_by_name(m.benchmarks, c.benchmark)] = {c.calibration, c.test};

  std::vector<std::string> method_canon;
  for (const auto& cfg : m.methods) method_canon.push_back(dump(canonical_method(m, cfg)));
  const std::string full_canon = dump(canonical_full_method());

  std::unordered_map<std::uint64_t, std::uint32_t> unit_index;
  std::unordered_set<std::uint64_t> cell_seen;

  if (m.grids.size() > 32767) {
    throw InputError("the manifest has " + std::to_string(m.grids.size()) +
                     " grids; at most 32767 are supported");
  }
  for (const Grid& g : m.grids) {
    const auto grid_index = static_cast<std::int16_t>(&g - m.grids.data());
    const std::string decoding = decoding_text(m, grid_index);
    GridCount gc;
    gc.grid = g.name;
    gc.models = static_cast<std::int64_t>(g.models.size());
    gc.backends = static_cast<std::int64_t>(g.backends.size());
    gc.protocols = static_cast<std::int64_t>(g.protocols.size());
    // The (method, budget) pairs of one unit under one protocol.
    std::vector<MethodBudget> variants;
    for (const auto& name : g.methods) {
      const std::size_t mi = index_by_name(m.methods, name);
      const auto axis = methods::find_method(m.methods[mi].method)->axis;
      if (axis == methods::BudgetAxis::threshold) {
        ++gc.threshold_methods;
        for (double t : g.thresholds)
          variants.push_back({static_cast<std::int16_t>(mi), BudgetKind::threshold, t,
                              &method_canon[mi], budget_json(BudgetKind::threshold, t)});
      } else {
        ++gc.ratio_methods;
        const BudgetKind kind = *g.ratio_kind == RatioKind::compression ? BudgetKind::compression
                                                                        : BudgetKind::retention;
        for (double r : g.ratios)
          variants.push_back(
              {static_cast<std::int16_t>(mi), kind, r, &method_canon[mi], budget_json(kind, r)});
      }
    }
    gc.ratios = gc.ratio_methods ? static_cast<std::int64_t>(g.ratios.size()) : 0;
    gc.thresholds = gc.threshold_methods ? static_cast<std::int64_t>(g.thresholds.size()) : 0;
    variants.push_back(
        {-1, BudgetKind::none, 0.0, &full_canon, budget_json(BudgetKind::none, 0.0)});

    for (const auto& bname : g.benchmarks) {
      const std::size_t bi = index_by_name(m.benchmarks, bname);
      const Benchmark& b = m.benchmarks[bi];
      gc.instances += static_cast<std::int64_t>(b.tasks.size()) * b.instances;
      for (const auto& model_name : g.models) {
        const std::size_t mi = index_by_name(m.models, model_name);
        for (const auto& backend : g.backends) {
          const AttentionBackend be = *parse_attention_backend(backend);
          for (std::size_t ti = 0; ti < b.tasks.size(); ++ti) {
            std::vector<Split> splits;
            if (auto it = split_of.find(bi); it != split_of.end())
              splits = split_instances(m.study.seed, b.name, b.tasks[ti], b.instances,
                                       it->second.first, it->second.second);
            for (const bool reuse : {false, true}) {
              std::vector<Protocol> protocols;
              for (const auto& proto : g.protocols) {
                const Protocol pi = *parse_protocol(proto);
                if ((pi == Protocol::reuse) == reuse) protocols.push_back(pi);
              }
              if (protocols.empty()) continue;
              const UnitPrefix prefix = unit_prefix(m, mi, bi, ti, be, reuse);
              for (std::int64_t inst = 0; inst < b.instances; ++inst) {
                const std::string ut = prefix.head + std::to_string(inst) + prefix.tail;
                const std::uint64_t uid = id_of(ut);
                auto [uit, fresh] =
                    unit_index.emplace(uid, static_cast<std::uint32_t>(ex.units.size()));
                if (fresh) {
                  Unit u;
                  u.id = uid;
                  u.model = static_cast<std::uint16_t>(mi);
                  u.benchmark = static_cast<std::uint16_t>(bi);
                  u.task = static_cast<std::uint16_t>(ti);
                  u.attention_backend = be;
                  u.instance = inst;
                  u.split = splits.empty() ? Split::none : splits[static_cast<std::size_t>(inst)];
                  u.reuse = reuse;
                  ex.units.push_back(u);
                }
                // Units of the printout: (model, backend, instance) tuples; reuse units apart.
                if (reuse) {
                  ++gc.reuse_units;
                  if (protocols.size() == g.protocols.size()) ++gc.units;
                } else {
                  ++gc.units;
                }
                const std::uint32_t ui = uit->second;
                for (const Protocol pi : protocols) {
                  for (const MethodBudget& v : variants) {
                    const std::uint64_t cid =
                        id_of(cell_tuple_from(v.budget_text, *v.method_canon, pi, ut, decoding));
                    ++gc.cells;
                    if (!cell_seen.insert(cid).second) {
                      ++ex.overlapping_cells;
                      continue;
                    }
                    Cell c;
                    c.id = cid;
                    c.unit = ui;
                    c.method = v.method;
                    c.protocol = pi;
                    c.budget_kind = v.kind;
                    c.budget = v.budget;
                    c.decoding_grid = g.decoding ? grid_index : std::int16_t{-1};
                    ex.cells.push_back(c);
                    ++ex.units[ui].n_cells;
                  }
                }
              }
            }
          }
        }
      }
    }
    gc.cells_per_unit =
        (gc.ratio_methods * gc.ratios + gc.threshold_methods * gc.thresholds + 1) * gc.protocols;
    ex.grids.push_back(gc);
  }

  // Sort by id; remap cell -> unit indices.
  std::vector<std::uint32_t> order(ex.units.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return ex.units[a].id < ex.units[b].id; });
  std::vector<std::uint32_t> new_pos(order.size());
  std::vector<Unit> sorted_units;
  sorted_units.reserve(order.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    new_pos[order[i]] = i;
    sorted_units.push_back(ex.units[order[i]]);
  }
  ex.units = std::move(sorted_units);
  for (auto& c : ex.cells) c.unit = new_pos[c.unit];
  std::sort(ex.cells.begin(), ex.cells.end(),
            [](const Cell& a, const Cell& b) { return a.id < b.id; });
  return ex;
}

}  // namespace kvaudit::manifest

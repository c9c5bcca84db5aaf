#include "suite/manifest/manifest_parser.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "methods/param_lists.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/diagnostics.h"
#include "suite/manifest/method_windows.h"
#include "suite/manifest/number_format.h"

namespace kvaudit::manifest {
namespace {

namespace bm = kvaudit::benchmarks;
namespace mc = kvaudit::methods;

SourcePos pos_of(const toml::source_region& r) {
  return SourcePos{static_cast<int>(r.begin.line), static_cast<int>(r.begin.column)};
}
SourcePos pos_of(const toml::node& n) { return pos_of(n.source()); }

std::string type_phrase(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return n.is_array_of_tables() ? "an array of tables" : "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    default:
      return "nothing";
  }
}

template <typename Range>
std::string join(const Range& r, const char* sep = ", ") {
  std::string s;
  for (const auto& x : r) {
    if (!s.empty()) s += sep;
    s += x;
  }
  return s;
}

// "knorm, kvzap": the catalogue's per-entry scorers (dms with decoding = true wraps one).
std::string per_entry_scorer_ids() {
  std::vector<std::string> ids;
  for (const auto& spec : mc::method_catalog())
    if (spec.per_entry_scorer) ids.push_back(spec.id);
  return join(ids);
}

template <std::size_t N>
bool one_of(const std::string& v, const char* const (&set)[N]) {
  return std::any_of(std::begin(set), std::end(set), [&](const char* s) { return v == s; });
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(s[0])) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

// Reads the fields of one TOML table, remembering which keys were consumed so that every key left
// over is reported as unknown.
class Fields {
 public:
  Fields(const toml::table& table, std::string prefix, Diagnostics& diag)
      : table_(table), prefix_(std::move(prefix)), diag_(diag) {}

  std::string field(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }
  SourcePos pos() const { return pos_of(table_); }
  Diagnostics& diag() { return diag_; }

  const toml::node* get(const std::string& key, bool required) {
    used_.insert(key);
    const toml::node* n = table_.get(key);
    if (!n && required) diag_.error(pos(), field(key), "missing required key");
    return n;
  }

  std::optional<std::string> string(const std::string& key, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return std::nullopt;
    if (!n->is_string()) {
      diag_.error(pos_of(*n), field(key), "expected a string, found " + type_phrase(*n));
      return std::nullopt;
    }
    return n->as_string()->get();
  }

  std::optional<std::int64_t> integer(const std::string& key, bool required, std::int64_t min,
                                      std::int64_t max) {
    const toml::node* n = get(key, required);
    if (!n) return std::nullopt;
    if (!n->is_integer()) {
      diag_.error(pos_of(*n), field(key), "expected an integer, found " + type_phrase(*n));
      return std::nullopt;
    }
    const std::int64_t v = n->as_integer()->get();
    if (v < min || v > max) {
      diag_.error(pos_of(*n), field(key),
                  std::to_string(v) + " is outside [" + std::to_string(min) + ", " +
                      std::to_string(max) + "]");
      return std::nullopt;
    }
    return v;
  }

  // A real number; integers are accepted and converted.
  std::optional<double> real(const std::string& key, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return std::nullopt;
    return as_real(*n, field(key));
  }

  std::optional<double> as_real(const toml::node& n, const std::string& where) {
    if (n.is_floating_point()) {
      const double v = n.as_floating_point()->get();
      if (!std::isfinite(v)) {
        diag_.error(pos_of(n), where, "expected a finite number, found " + format_number(v));
        return std::nullopt;
      }
      return v;
    }
    if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
    diag_.error(pos_of(n), where, "expected a number, found " + type_phrase(n));
    return std::nullopt;
  }

  // A string that must be one of `set`.
  template <std::size_t N>
  std::optional<std::string> choice(const std::string& key, bool required,
                                    const char* const (&set)[N], const char* what) {
    const toml::node* n = table_.get(key);
    auto v = string(key, required);
    if (!v) return std::nullopt;
    if (!one_of(*v, set)) {
      std::vector<std::string> names(std::begin(set), std::end(set));
      diag_.error(
          pos_of(*n), field(key),
          "unknown " + std::string(what) + " '" + *v + "' (expected one of: " + join(names) + ")");
      return std::nullopt;
    }
    return v;
  }

  const toml::array* array(const std::string& key, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return nullptr;
    if (!n->is_array()) {
      diag_.error(pos_of(*n), field(key), "expected an array, found " + type_phrase(*n));
      return nullptr;
    }
    return n->as_array();
  }

  // A non-empty array of distinct strings; each element is checked by `check` (which reports its
  // own error and returns false to drop the element).
  std::optional<std::vector<std::string>> string_set(
      const std::string& key, bool required, const char* what,
      const std::function<bool(const std::string&, SourcePos, const std::string&)>& check) {
    const toml::array* a = array(key, required);
    if (!a) return std::nullopt;
    if (a->empty()) {
      diag_.error(pos_of(*a), field(key),
                  std::string("empty list; at least one ") + what + " is needed");
      return std::nullopt;
    }
    std::vector<std::string> out;
    std::map<std::string, std::size_t> seen;
    bool ok = true;
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string where = field(key) + "[" + std::to_string(i) + "]";
      if (!e.is_string()) {
        diag_.error(pos_of(e), where, "expected a string, found " + type_phrase(e));
        ok = false;
        continue;
      }
      const std::string v = e.as_string()->get();
      if (auto it = seen.find(v); it != seen.end()) {
        diag_.error(pos_of(e), where,
                    "duplicate " + std::string(what) + " '" + v + "' (also at index " +
                        std::to_string(it->second) + ")");
        ok = false;
        continue;
      }
      seen.emplace(v, i);
      if (check && !check(v, pos_of(e), where)) {
        ok = false;
        continue;
      }
      out.push_back(v);
    }
    if (!ok) return std::nullopt;
    std::sort(out.begin(), out.end());
    return out;
  }

  // Reports every key of the table that was not read.
  void finish(const std::string& allowed_hint) {
    for (auto&& [k, v] : table_) {
      const std::string key(k.str());
      if (!used_.count(key)) {
        diag_.error(pos_of(k.source()), field(key), "unknown key (allowed: " + allowed_hint + ")");
      }
    }
  }

  std::string allowed() const { return join(used_); }

 private:
  const toml::table& table_;
  std::string prefix_;
  Diagnostics& diag_;
  std::set<std::string> used_;
};

// ---------------------------------------------------------------------------------------------
class Parser {
 public:
  Parser(const toml::table& root, Manifest& m, Diagnostics& diag)
      : root_(root), m_(m), diag_(diag) {}

  void run() {
    Fields top(root_, "", diag_);
    study(top);
    models(top);
    benchmarks(top);
    method_configs(top);
    grids(top);
    certifications(top);
    statistics(top);
    sharding(top);
    top.finish(top.allowed());
  }

 private:
  const toml::table* sub_table(Fields& f, const std::string& key, bool required) {
    const toml::node* n = f.get(key, required);
    if (!n) return nullptr;
    if (!n->is_table()) {
      diag_.error(pos_of(*n), key, "expected a table, found " + type_phrase(*n));
      return nullptr;
    }
    return n->as_table();
  }

  // An array of tables ([[key]]); reports wrong shapes.
  std::vector<std::pair<const toml::table*, std::size_t>> table_array(Fields& f,
                                                                      const std::string& key,
                                                                      bool required) {
    std::vector<std::pair<const toml::table*, std::size_t>> out;
    const toml::node* n = f.get(key, false);
    if (!n) {
      if (required)
        diag_.error(f.pos(), f.field(key),
                    "missing: at least one [[" + f.field(key) + "]] table is needed");
      return out;
    }
    if (!n->is_array()) {
      diag_.error(pos_of(*n), key,
                  "expected an array of tables ([[" + key + "]]), found " + type_phrase(*n));
      return out;
    }
    const toml::array& a = *n->as_array();
    if (a.empty() && required) diag_.error(pos_of(a), key, "empty list; at least one is needed");
    for (std::size_t i = 0; i < a.size(); ++i) {
      const toml::node& e = *a.get(i);
      if (!e.is_table()) {
        diag_.error(pos_of(e), key + "[" + std::to_string(i) + "]",
                    "expected a table, found " + type_phrase(e));
        continue;
      }
      out.emplace_back(e.as_table(), i);
    }
    return out;
  }

  // Checks a name field and its uniqueness within `seen`.
  std::optional<std::string> name_field(Fields& f, const std::string& key, const char* what,
                                        std::map<std::string, SourcePos>& seen) {
    const toml::node* n = f.get(key, true);
    if (!n) return std::nullopt;
    if (!n->is_string()) {
      diag_.error(pos_of(*n), f.field(key), "expected a string, found " + type_phrase(*n));
      return std::nullopt;
    }
    const std::string v = n->as_string()->get();
    if (!valid_name(v)) {
      diag_.error(pos_of(*n), f.field(key),
                  "'" + v +
                      "' is not a valid name (1-64 characters: letters, digits, '.', '_', "
                      "'-'; starting with a letter or digit)");
      return std::nullopt;
    }
    if (auto it = seen.find(v); it != seen.end()) {
      diag_.error(pos_of(*n), f.field(key),
                  std::string("duplicate ") + what + " name '" + v + "' (first at line " +
                      std::to_string(it->second.line) + ")");
      return std::nullopt;
    }
    seen.emplace(v, pos_of(*n));
    return v;
  }

  void study(Fields& top) {
    const toml::table* t = sub_table(top, "study", true);
    if (!t) return;
    Fields f(*t, "study", diag_);
    m_.study.pos = f.pos();
    std::map<std::string, SourcePos> seen;
    if (auto v = name_field(f, "name", "study", seen)) m_.study.name = *v;
    if (auto v = f.integer("seed", true, 0, std::numeric_limits<std::int64_t>::max()))
      m_.study.seed = static_cast<std::uint64_t>(*v);
    if (auto v = f.string("output_dir", true)) {
      if (v->empty()) {
        diag_.error(pos_of(*t->get("output_dir")), "study.output_dir", "must not be empty");
      }
      m_.study.output_dir = *v;
    }
    if (auto v = f.string("description", false)) m_.study.description = *v;
    f.finish("name, seed, output_dir, description");
  }

  void models(Fields& top) {
    std::map<std::string, SourcePos> seen;
    for (const auto& entry : table_array(top, "models", true)) {
      const toml::table* t = entry.first;
      const std::size_t i = entry.second;
      Fields f(*t, "models[" + std::to_string(i) + "]", diag_);
      Model model;
      model.pos = f.pos();
      if (auto v = name_field(f, "name", "model", seen)) model.name = *v;
      if (auto v = f.string("path", true)) {
        model.path = *v;
        model.path_pos = pos_of(*t->get("path"));
        if (v->empty()) diag_.error(model.path_pos, f.field("path"), "must not be empty");
      }
      if (auto v = f.choice("format", true, kFormats, "model format")) model.format = *v;
      if (auto v = f.choice("chat_template", true, kChatTemplates, "chat template family"))
        model.chat_template = *v;
      model.dtype = "bf16";
      model.dtype_pos = model.pos;
      if (auto v = f.choice("dtype", false, kDtypes, "dtype")) {
        model.dtype = *v;
        model.dtype_pos = pos_of(*t->get("dtype"));
      }
      f.finish("name, path, format, chat_template, dtype");
      m_.models.push_back(std::move(model));
    }
  }

  void benchmarks(Fields& top) {
    std::map<std::string, SourcePos> seen;
    for (const auto& entry : table_array(top, "benchmarks", true)) {
      const toml::table* t = entry.first;
      const std::size_t i = entry.second;
      Fields f(*t, "benchmarks[" + std::to_string(i) + "]", diag_);
      Benchmark b;
      b.pos = f.pos();
      if (auto v = name_field(f, "name", "benchmark", seen)) b.name = *v;
      static constexpr const char* kKinds[] = {"longbench", "ruler"};
      auto kind = f.choice("kind", true, kKinds, "benchmark kind");
      if (!kind) {
        // Without a kind nothing else can be checked; mark the other keys as read.
        for (auto&& [k, v] : *t) f.get(std::string(k.str()), false);
        continue;
      }
      b.kind = *kind == "ruler" ? bm::BenchmarkKind::ruler : bm::BenchmarkKind::longbench;
      const bool ruler = b.kind == bm::BenchmarkKind::ruler;
      if (auto v = tasks(f, b.kind)) b.tasks = *v;
      if (auto v = f.integer("length", true, 256, 1 << 20)) b.length = *v;
      if (auto v = f.integer("instances", true, 1, 1000000)) b.instances = *v;
      auto path_field = [&](const char* key, bool required) {
        auto v = f.string(key, required);
        if (!v) return std::string();
        const SourcePos p = pos_of(*t->get(key));
        if (v->empty()) diag_.error(p, f.field(key), "must not be empty");
        b.path_pos[key] = p;
        return *v;
      };
      if (ruler) {
        b.essay = "builtin";
        if (t->get("essay")) b.essay = path_field("essay", false);
        b.squad = path_field("squad", false);
        b.hotpotqa = path_field("hotpotqa", false);
        b.generation_tokenizer = path_field("generation_tokenizer", false);
        for (const auto& task : b.tasks) {
          const bm::TaskSpec* spec = bm::find_task(b.kind, task);
          if (spec->data == bm::DataNeed::squad && b.squad.empty())
            diag_.error(f.pos(), f.field("squad"),
                        "task qa_1 needs a SQuAD v2 dev file; set squad = \"PATH\"");
          if (spec->data == bm::DataNeed::hotpotqa && b.hotpotqa.empty())
            diag_.error(f.pos(), f.field("hotpotqa"),
                        "task qa_2 needs a HotpotQA dev-distractor file; set hotpotqa = \"PATH\"");
        }
        f.finish(
            "name, kind, tasks, length, instances, essay, squad, hotpotqa, "
            "generation_tokenizer");
      } else {
        b.data_dir = path_field("data_dir", true);
        if (const toml::node* n = f.get("generation_tokenizer", false))
          diag_.error(pos_of(*n), f.field("generation_tokenizer"),
                      "only RULER benchmarks take a generation tokenizer (LongBench prompts are "
                      "truncated at run time with each model's own tokenizer); remove the key");
        f.finish("name, kind, tasks, length, instances, data_dir");
      }
      m_.benchmarks.push_back(std::move(b));
    }
  }

  std::optional<std::vector<std::string>> tasks(Fields& f, bm::BenchmarkKind kind) {
    const toml::node* n = f.get("tasks", true);
    if (!n) return std::nullopt;
    if (n->is_string()) {
      if (n->as_string()->get() != "all") {
        diag_.error(pos_of(*n), f.field("tasks"),
                    "expected \"all\" or an array of task names, found the string '" +
                        n->as_string()->get() + "'");
        return std::nullopt;
      }
      std::vector<std::string> all;
      for (const auto& t : bm::tasks_of(kind))
        if (t.english) all.push_back(t.name);
      std::sort(all.begin(), all.end());
      return all;
    }
    const std::string kind_str(bm::kind_name(kind));
    return f.string_set("tasks", true, "task",
                        [&](const std::string& v, SourcePos p, const std::string& where) {
                          if (bm::find_task(kind, v)) return true;
                          diag_.error(p, where,
                                      "unknown " + kind_str + " task '" + v +
                                          "' (known: " + bm::task_name_list(kind) + ")");
                          return false;
                        });
  }

  void method_configs(Fields& top) {
    const toml::table* t = sub_table(top, "methods", true);
    if (!t) return;
    if (t->empty()) diag_.error(pos_of(*t), "methods", "no method configurations");
    std::vector<std::pair<std::string, SourcePos>> refs;  // (config.param, pos) to resolve later
    for (auto&& [k, node] : *t) {
      const std::string name(k.str());
      const std::string prefix = "methods." + name;
      if (!valid_name(name)) {
        diag_.error(pos_of(k.source()), prefix,
                    "'" + name +
                        "' is not a valid name (1-64 characters: letters, digits, '.', "
                        "'_', '-'; starting with a letter or digit)");
        continue;
      }
      if (!node.is_table()) {
        diag_.error(pos_of(node), prefix, "expected a table, found " + type_phrase(node));
        continue;
      }
      const toml::table& mt = *node.as_table();
      Fields f(mt, prefix, diag_);
      MethodConfig cfg;
      cfg.name = name;
      cfg.pos = pos_of(k.source());
      cfg.method = name;
      const toml::node* mn = mt.get("method");
      if (auto v = f.string("method", false)) cfg.method = *v;
      const mc::MethodSpec* spec = mc::find_method(cfg.method);
      if (!spec) {
        diag_.error(mn ? pos_of(*mn) : cfg.pos, f.field("method"),
                    "unknown method '" + cfg.method + "' (known: " + mc::method_id_list() + ")");
        for (auto&& [pk, pv] : mt) f.get(std::string(pk.str()), false);
        continue;
      }
      if (spec->axis == mc::BudgetAxis::none) {
        diag_.error(mn ? pos_of(*mn) : cfg.pos, f.field("method"),
                    "the full-KV reference is added to every grid automatically; do not declare "
                    "it as a method");
        for (auto&& [pk, pv] : mt) f.get(std::string(pk.str()), false);
        continue;
      }
      const toml::node* vn = mt.get("variant");
      if (auto v = f.string("variant", false)) {
        if (spec->variants.empty()) {
          diag_.error(pos_of(*vn), f.field("variant"), "method '" + spec->id + "' has no variants");
        } else if (std::find(spec->variants.begin(), spec->variants.end(), *v) ==
                   spec->variants.end()) {
          diag_.error(pos_of(*vn), f.field("variant"),
                      "unknown variant '" + *v + "' of method '" + spec->id +
                          "' (expected one of: " + join(spec->variants) + ")");
        } else {
          cfg.variant = *v;
        }
      } else if (!spec->variants.empty()) {
        cfg.variant = spec->variants.front();
      }
      std::vector<std::string> allowed = {"method", "variant"};
      for (const mc::ParamSpec& p : spec->params) {
        allowed.push_back(p.name);
        param(f, cfg, p, refs);
      }
      f.finish(join(allowed));
      m_.methods.push_back(std::move(cfg));
    }
    // Resolve wrapper references now that every config is known.
    std::sort(m_.methods.begin(), m_.methods.end(),
              [](const MethodConfig& a, const MethodConfig& b) { return a.name < b.name; });
    for (const auto& [where, p] : refs) {
      const auto dot = where.rfind('.');
      const std::string cfg_name =
          where.substr(std::string("methods.").size(), dot - std::string("methods.").size());
      const MethodConfig* cfg = m_.find_method(cfg_name);
      const std::string target = std::get<std::string>(cfg->params.at(where.substr(dot + 1)));
      const MethodConfig* ref = m_.find_method(target);
      if (!ref) {
        diag_.error(p, where, "no method configuration named '" + target + "'");
      } else if (ref->name == cfg->name) {
        diag_.error(p, where, "a method cannot wrap itself");
      } else if (!mc::find_method(ref->method)->is_scorer) {
        diag_.error(p, where,
                    "'" + target + "' (method " + ref->method +
                        ") is not a scorer; wrappers take a scoring method");
      } else if (const auto typed = typed_params(*cfg);
                 typed && std::holds_alternative<mc::DmsParams>(*typed) &&
                 std::get<mc::DmsParams>(*typed).decoding &&
                 !mc::find_method(ref->method)->per_entry_scorer) {
        // methods/dms.h: decoding scores each new entry alone as it arrives.
        diag_.error(p, where,
                    "'" + target + "' (method " + ref->method +
                        ") cannot score entries one at a time; dms with decoding = true needs a "
                        "per-entry scorer (" +
                        per_entry_scorer_ids() + ")");
      }
    }
    for (const auto& r : list_refs_) {
      const MethodConfig* ref = m_.find_method(r.target);
      if (!ref) {
        diag_.error(r.pos, r.where, "no method configuration named '" + r.target + "'");
      } else if (ref->name == r.config) {
        diag_.error(r.pos, r.where, "a method cannot wrap itself");
      } else if (ref->method == "think") {
        // ThinK (methods/think.h) prunes key channels: composed takes it as its last press, with
        // ThinKPress's reported ratio (key_channel_compression_ratio / 2) as its ratio.
        const MethodConfig* owner = m_.find_method(r.config);
        const auto composed = owner != nullptr ? typed_params(*owner) : std::nullopt;
        const auto think = typed_params(*ref);
        const auto* cp = composed ? std::get_if<mc::ComposedParams>(&*composed) : nullptr;
        if (cp == nullptr || cp->presses.empty() || cp->presses.back() != r.target ||
            std::count(cp->presses.begin(), cp->presses.end(), r.target) != 1) {
          diag_.error(r.pos, r.where,
                      "'" + r.target +
                          "' (method think) prunes key channels: only composed takes it, as "
                          "its last press");
        } else if (think && cp->compression_ratios.size() == cp->presses.size()) {
          const double reported =
              std::get<mc::ThinkParams>(*think).key_channel_compression_ratio / 2.0;
          if (std::abs(cp->compression_ratios.back() - reported) > 1e-9)
            diag_.error(r.pos, r.where,
                        "'" + r.target + "' (method think) reports the compression ratio " +
                            format_number(reported) +
                            " (key_channel_compression_ratio / 2); its entry of "
                            "compression_ratios is " +
                            format_number(cp->compression_ratios.back()));
        }
      } else if (!mc::find_method(ref->method)->is_scorer) {
        diag_.error(r.pos, r.where,
                    "'" + r.target + "' (method " + ref->method +
                        ") is not a scorer; wrappers take a scoring method");
      }
    }
    // What per-parameter ranges cannot say (methods/catalog.h MethodSpec::check_params):
    // parameters that do not fit together, at the offending parameter's position.
    for (const auto& cfg : m_.methods) {
      const mc::MethodSpec* spec = mc::find_method(cfg.method);
      if (!spec->check_params) continue;
      const auto typed = typed_params(cfg);
      if (!typed) continue;
      if (const auto problem = spec->check_params(*typed)) {
        const auto at = cfg.param_pos.find(problem->param);
        diag_.error(at != cfg.param_pos.end() ? at->second : cfg.pos,
                    "methods." + cfg.name + "." + problem->param, problem->message);
      }
    }
  }

  void param(Fields& f, MethodConfig& cfg, const mc::ParamSpec& p,
             std::vector<std::pair<std::string, SourcePos>>& refs) {
    const toml::node* n = f.get(p.name, false);
    const std::string where = f.field(p.name);
    if (!n) {
      auto def = mc::default_for(p, cfg.variant);
      if (def) {
        cfg.params[p.name] = *def;
      } else {
        diag_.error(f.pos(), where,
                    "missing required parameter of method '" + cfg.method + "' (" + p.doc + ")");
      }
      return;
    }
    cfg.param_pos[p.name] = pos_of(*n);
    auto range_text = [&](double lo, double hi, bool hi_excl) {
      std::string s = "[" + format_number(lo) + ", ";
      if (hi <= lo) return s + "inf)";
      return s + format_number(hi) + (hi_excl ? ")" : "]");
    };
    switch (p.type) {
      case mc::ParamType::integer: {
        if (!n->is_integer()) {
          diag_.error(pos_of(*n), where, "expected an integer, found " + type_phrase(*n));
          return;
        }
        const std::int64_t v = n->as_integer()->get();
        const double dv = static_cast<double>(v);
        if (dv < p.min || (p.max > p.min && dv > p.max)) {
          diag_.error(pos_of(*n), where,
                      std::to_string(v) + " is outside " + range_text(p.min, p.max, false));
          return;
        }
        if (p.odd_only && v % 2 == 0) {
          diag_.error(pos_of(*n), where, std::to_string(v) + " must be odd");
          return;
        }
        cfg.params[p.name] = v;
        return;
      }
      case mc::ParamType::real: {
        auto v = f.as_real(*n, where);
        if (!v) return;
        if (*v < p.min || (p.max > p.min && (p.max_exclusive ? *v >= p.max : *v > p.max))) {
          diag_.error(
              pos_of(*n), where,
              format_number(*v) + " is outside " + range_text(p.min, p.max, p.max_exclusive));
          return;
        }
        cfg.params[p.name] = *v;
        return;
      }
      case mc::ParamType::boolean:
        if (!n->is_boolean()) {
          diag_.error(pos_of(*n), where, "expected a boolean, found " + type_phrase(*n));
          return;
        }
        cfg.params[p.name] = n->as_boolean()->get();
        return;
      case mc::ParamType::choice: {
        if (!n->is_string()) {
          diag_.error(pos_of(*n), where, "expected a string, found " + type_phrase(*n));
          return;
        }
        const std::string v = n->as_string()->get();
        if (std::find(p.choices.begin(), p.choices.end(), v) == p.choices.end()) {
          diag_.error(pos_of(*n), where,
                      "unknown value '" + v + "' (expected one of: " + join(p.choices) + ")");
          return;
        }
        cfg.params[p.name] = v;
        return;
      }
      case mc::ParamType::method_ref: {
        if (!n->is_string()) {
          diag_.error(pos_of(*n), where,
                      "expected the name of a method configuration, found " + type_phrase(*n));
          return;
        }
        cfg.params[p.name] = n->as_string()->get();
        refs.emplace_back(where, pos_of(*n));
        return;
      }
      case mc::ParamType::path: {
        // Kept as written (the hash does not depend on where the study lives); plan and run check
        // the file (path_check.h) and fingerprint it (input_fingerprints.h).
        if (!n->is_string() || n->as_string()->get().empty()) {
          diag_.error(pos_of(*n), where,
                      "expected a file path (a non-empty string), found " +
                          (n->is_string() ? std::string("an empty string") : type_phrase(*n)));
          return;
        }
        cfg.params[p.name] = n->as_string()->get();
        return;
      }
      case mc::ParamType::real_list: {
        // A TOML array of numbers, kept as one canonical string (methods/param_lists.h).
        const toml::array* a = n->as_array();
        if (a == nullptr || a->empty()) {
          diag_.error(pos_of(*n), where,
                      "expected a non-empty array of numbers, found " +
                          (a != nullptr ? std::string("an empty array") : type_phrase(*n)));
          return;
        }
        std::vector<double> values;
        bool ok = true;
        for (std::size_t i = 0; i < a->size(); ++i) {
          const toml::node& e = *a->get(i);
          const std::string item = where + "[" + std::to_string(i) + "]";
          auto v = f.as_real(e, item);
          if (!v) {
            ok = false;
          } else if (*v < p.min ||
                     (p.max > p.min && (p.max_exclusive ? *v >= p.max : *v > p.max))) {
            diag_.error(
                pos_of(e), item,
                format_number(*v) + " is outside " + range_text(p.min, p.max, p.max_exclusive));
            ok = false;
          } else {
            values.push_back(*v);
          }
        }
        if (ok) cfg.params[p.name] = mc::format_real_list(values);
        return;
      }
      case mc::ParamType::method_ref_list: {
        // A TOML array of configuration names (each checked like `scorer` once all are known).
        const toml::array* a = n->as_array();
        if (a == nullptr || a->empty()) {
          diag_.error(pos_of(*n), where,
                      "expected a non-empty array of method configuration names, found " +
                          (a != nullptr ? std::string("an empty array") : type_phrase(*n)));
          return;
        }
        std::vector<std::string> names;
        bool ok = true;
        for (std::size_t i = 0; i < a->size(); ++i) {
          const toml::node& e = *a->get(i);
          const std::string item = where + "[" + std::to_string(i) + "]";
          if (!e.is_string()) {
            diag_.error(pos_of(e), item,
                        "expected the name of a method configuration, found " + type_phrase(e));
            ok = false;
            continue;
          }
          names.push_back(e.as_string()->get());
          list_refs_.push_back({cfg.name, item, pos_of(e), names.back()});
        }
        if (ok) cfg.params[p.name] = mc::format_name_list(names);
        return;
      }
    }
  }

  // The elements of method_ref_list parameters, checked once every configuration is known.
  struct ListRef {
    std::string config;
    std::string where;
    SourcePos pos;
    std::string target;
  };
  std::vector<ListRef> list_refs_;

  // A configuration's typed parameters (catalogue defaults, then its values), or nullopt when a
  // parameter was refused above (and is missing from cfg.params).
  static std::optional<mc::MethodParams> typed_params(const MethodConfig& cfg) {
    const mc::MethodSpec* spec = mc::find_method(cfg.method);
    if (spec == nullptr) return std::nullopt;
    mc::MethodParams typed = spec->typed_defaults(cfg.variant);
    for (const auto& p : spec->params) {
      const auto it = cfg.params.find(p.name);
      if (it == cfg.params.end()) return std::nullopt;
      p.assign(typed, it->second);
    }
    return typed;
  }

  void grids(Fields& top) {
    std::map<std::string, SourcePos> seen;
    for (const auto& entry : table_array(top, "grids", true)) {
      const toml::table* t = entry.first;
      const std::size_t i = entry.second;
      Fields f(*t, "grids[" + std::to_string(i) + "]", diag_);
      Grid g;
      g.pos = f.pos();
      if (auto v = name_field(f, "name", "grid", seen)) g.name = *v;
      if (auto v = f.string_set("benchmarks", true, "benchmark",
                                [&](const std::string& b, SourcePos p, const std::string& w) {
                                  return known(m_.find_benchmark(b) != nullptr, p, w, "benchmark",
                                               b);
                                }))
        g.benchmarks = *v;
      if (t->get("models")) {
        if (auto v = f.string_set("models", false, "model",
                                  [&](const std::string& b, SourcePos p, const std::string& w) {
                                    return known(m_.find_model(b) != nullptr, p, w, "model", b);
                                  }))
          g.models = *v;
      } else {
        for (const auto& model : m_.models) g.models.push_back(model.name);
        std::sort(g.models.begin(), g.models.end());
      }
      bool any_ratio = false, any_threshold = false;
      // The first threshold method of the grid that needs thresholds > 0 (methods.<config>), if
      // any.
      std::string positive_threshold_method;
      if (auto v = f.string_set("methods", true, "method",
                                [&](const std::string& b, SourcePos p, const std::string& w) {
                                  const MethodConfig* c = m_.find_method(b);
                                  if (!known(c != nullptr, p, w, "method configuration", b))
                                    return false;
                                  const mc::MethodSpec* spec = mc::find_method(c->method);
                                  if (spec->axis == mc::BudgetAxis::threshold) {
                                    any_threshold = true;
                                    if (!spec->thresholds_of_any_sign &&
                                        positive_threshold_method.empty())
                                      positive_threshold_method = b;
                                  } else {
                                    any_ratio = true;
                                  }
                                  return true;
                                }))
        g.methods = *v;
      const toml::node* cn = t->get("compression");
      const toml::node* rn = t->get("retention");
      if (cn && rn) {
        diag_.error(pos_of(*rn), f.field("retention"),
                    "give either compression or retention, not both");
        f.get("compression", false);
        f.get("retention", false);
      } else if (cn || rn) {
        g.ratio_kind = cn ? RatioKind::compression : RatioKind::retention;
        const std::string key = cn ? "compression" : "retention";
        if (auto v = numbers(f, key, cn != nullptr ? "compression" : "retention")) g.ratios = *v;
        // Methods whose parameters fix the budget (MethodSpec::fixed_compression) take no other.
        for (const auto& name : g.methods) {
          const MethodConfig* c = m_.find_method(name);
          const mc::MethodSpec* spec = c != nullptr ? mc::find_method(c->method) : nullptr;
          if (spec == nullptr || !spec->fixed_compression) continue;
          const auto typed = typed_params(*c);
          const auto fixed = typed ? spec->fixed_compression(*typed) : std::nullopt;
          if (!fixed) continue;
          for (const double r : g.ratios) {
            const double compression = cn != nullptr ? r : 1.0 - r;
            if (std::abs(compression - *fixed) <= 1e-9) continue;
            diag_.error(pos_of(cn ? *cn : *rn), f.field(key),
                        "method configuration '" + name + "' (" + c->method +
                            ") fixes the compression ratio at " + format_number(*fixed) +
                            (c->method == "think"
                                 ? std::string(" through its key_channel_compression_ratio "
                                               "(ThinKPress reports ratio / 2 and has no other "
                                               "budget)")
                                 : std::string(" through its compression_ratios (kvpress has "
                                               "no other budget for it)")) +
                            "; this grid asks for " + key + " " + format_number(r) +
                            ": give it a grid of its own with compression = [" +
                            format_number(*fixed) + "]");
          }
        }
        if (!any_ratio && !g.methods.empty())
          diag_.error(pos_of(cn ? *cn : *rn), f.field(key),
                      "no method of this grid takes a ratio budget");
      } else if (any_ratio) {
        diag_.error(f.pos(), f.field("compression"),
                    "missing: a grid with ratio-budget methods needs compression = [...] or "
                    "retention = [...]");
      }
      if (const toml::node* tn = t->get("thresholds")) {
        // Thresholds of any sign (finite: as_real) when every threshold method of the grid takes
        // them (dms).
        const std::string kind =
            any_threshold && positive_threshold_method.empty() ? "score threshold" : "threshold";
        threshold_owner_ = positive_threshold_method;
        if (auto v = numbers(f, "thresholds", kind)) g.thresholds = *v;
        if (!any_threshold && !g.methods.empty())
          diag_.error(pos_of(*tn), f.field("thresholds"),
                      "no method of this grid takes a threshold budget");
      } else if (any_threshold) {
        diag_.error(f.pos(), f.field("thresholds"),
                    "missing: a grid with threshold methods (refreekv) needs thresholds = [...]");
      }
      if (auto v = f.string_set("protocols", true, "protocol",
                                [&](const std::string& b, SourcePos p, const std::string& w) {
                                  return member(b, p, w, kProtocolNames, "protocol");
                                }))
        g.protocols = *v;
      if (std::find(g.protocols.begin(), g.protocols.end(), "reuse") != g.protocols.end()) {
        for (const std::string& bname : g.benchmarks) {
          const Benchmark* b = m_.find_benchmark(bname);
          if (b == nullptr) continue;
          for (const std::string& task : b->tasks) {
            if (benchmarks::has_reuse_form(b->kind, task)) continue;
            diag_.error(pos_of(*t->get("protocols")), f.field("protocols"),
                        "\"reuse\" needs contexts with several questions, but benchmark '" + bname +
                            "' has the RULER task '" + task +
                            "' (one question per context); of RULER only " +
                            std::string(benchmarks::kRulerMultiQuestionTask) +
                            " has a multi-question form (give the reuse grid a RULER benchmark "
                            "whose tasks are [\"" +
                            std::string(benchmarks::kRulerMultiQuestionTask) + "\"])");
          }
        }
      }
      const std::string backends_key = renamed_key(*t, f, "attention_backends", "backends");
      if (auto v = f.string_set(backends_key, true, "attention backend",
                                [&](const std::string& b, SourcePos p, const std::string& w) {
                                  return member(b, p, w, kAttentionBackendNames,
                                                "attention backend");
                                }))
        g.backends = *v;
      if (const toml::table* dt = sub_table(f, "decoding", false)) {
        Fields d(*dt, f.field("decoding"), diag_);
        GridDecoding decoding;
        decoding.pos = d.pos();
        constexpr std::int64_t kMaxSteps = std::int64_t{1} << 30;
        if (auto v = d.string("method", true)) {
          if (m_.find_method(*v) == nullptr) {
            diag_.error(pos_of(*dt->get("method")), d.field("method"),
                        "unknown method configuration '" + *v + "'");
          }
          decoding.method = *v;
        }
        if (auto v = d.integer("compression_interval", true, 1, kMaxSteps)) {
          decoding.compression_interval = *v;
        }
        // A fixed target_size (DecodingPress) or target_compression_ratio (kvpress
        // CompressionRatioDecodingPress): exactly one of the two.
        const toml::node* ratio_node = dt->get("target_compression_ratio");
        if (ratio_node != nullptr && dt->get("target_size") != nullptr) {
          diag_.error(pos_of(*ratio_node), d.field("target_compression_ratio"),
                      "give either target_size or target_compression_ratio, not both");
        }
        if (auto v = d.integer("target_size", ratio_node == nullptr, 1, kMaxSteps)) {
          decoding.target_size = *v;
        }
        if (auto v = d.real("target_compression_ratio", false)) {
          if (!(*v >= 0.0 && *v < 1.0)) {
            diag_.error(pos_of(*ratio_node), d.field("target_compression_ratio"),
                        format_number(*v) +
                            " is outside [0, 1) (the fraction of the tokens seen "
                            "that each compression removes)");
          } else {
            decoding.target_compression_ratio = *v;
          }
        }
        if (auto v = d.integer("hidden_states_buffer_size", false, 0, kMaxSteps)) {
          decoding.hidden_states_buffer_size = *v;
        }
        if (auto v =
                d.choice("query_positions", false, kDecodingQueryPositions, "query positions")) {
          decoding.query_positions = *v;
        }
        if (auto v = d.integer("merge_budget", false, 1, kMaxSteps)) decoding.merge_budget = *v;
        if (decoding.merge_budget && ratio_node != nullptr) {
          diag_.error(pos_of(*ratio_node), d.field("target_compression_ratio"),
                      "CAM (merge_budget) compresses to a fixed target_size; kvpress CAMPress has "
                      "no target_compression_ratio");
        }
        d.finish(
            "method, compression_interval, target_size, target_compression_ratio, "
            "hidden_states_buffer_size, query_positions, merge_budget");
        // dms with decoding = true evicts while decoding by its own rule (methods/dms.h): one
        // decode-time rule per cell.
        for (const std::string& name : g.methods) {
          const MethodConfig* cfg = m_.find_method(name);
          const auto typed = cfg != nullptr ? typed_params(*cfg) : std::nullopt;
          if (typed && std::holds_alternative<mc::DmsParams>(*typed) &&
              std::get<mc::DmsParams>(*typed).decoding) {
            diag_.error(decoding.pos, f.field("decoding"),
                        "method '" + name +
                            "' (dms, decoding = true) already evicts while decoding; a grid with a "
                            "decoding table cannot also list it (one decode-time rule per cell)");
          }
        }
        g.decoding = decoding;
      }
      f.finish(
          "name, benchmarks, models, methods, compression, retention, thresholds, protocols, "
          "attention_backends, decoding");
      m_.grids.push_back(std::move(g));
    }
  }

  // The key a table uses for a renamed field: `current`, or `old` (the name before the attention
  // backend was called so; still accepted, with the same meaning). Both present is an error.
  std::string renamed_key(const toml::table& t, Fields& f, const char* current, const char* old) {
    const toml::node* now = t.get(current);
    const toml::node* before = t.get(old);
    if (now && before) {
      diag_.error(pos_of(*before), f.field(old),
                  std::string("give ") + current + " or its old name " + old + ", not both");
      f.get(old, false);
    }
    return before && !now ? old : current;
  }

  bool known(bool found, SourcePos p, const std::string& where, const char* what,
             const std::string& name) {
    if (!found) diag_.error(p, where, std::string("no ") + what + " named '" + name + "'");
    return found;
  }

  template <std::size_t N>
  bool member(const std::string& v, SourcePos p, const std::string& where,
              const char* const (&set)[N], const char* what) {
    if (one_of(v, set)) return true;
    std::vector<std::string> names(std::begin(set), std::end(set));
    diag_.error(
        p, where,
        "unknown " + std::string(what) + " '" + v + "' (expected one of: " + join(names) + ")");
    return false;
  }

  // A non-empty set of budget values; range depends on `kind`.
  std::optional<std::vector<double>> numbers(Fields& f, const std::string& key,
                                             const std::string& kind) {
    const toml::array* a = f.array(key, true);
    if (!a) return std::nullopt;
    if (a->empty()) {
      diag_.error(pos_of(*a), f.field(key), "empty list; at least one value is needed");
      return std::nullopt;
    }
    std::vector<double> out;
    bool ok = true;
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string where = f.field(key) + "[" + std::to_string(i) + "]";
      auto v = f.as_real(e, where);
      if (!v) {
        ok = false;
        continue;
      }
      if (!budget_in_range(*v, kind, pos_of(e), where)) {
        ok = false;
        continue;
      }
      if (std::find(out.begin(), out.end(), *v) != out.end()) {
        diag_.error(pos_of(e), where, "duplicate value " + format_number(*v));
        ok = false;
        continue;
      }
      out.push_back(*v);
    }
    if (!ok) return std::nullopt;
    std::sort(out.begin(), out.end());
    return out;
  }

  bool budget_in_range(double v, const std::string& kind, SourcePos p, const std::string& where) {
    if (kind == "compression" && !(v >= 0 && v < 1)) {
      diag_.error(p, where, "compression ratio " + format_number(v) + " is outside [0, 1)");
      return false;
    }
    if (kind == "retention" && !(v > 0 && v <= 1)) {
      diag_.error(p, where, "retention ratio " + format_number(v) + " is outside (0, 1]");
      return false;
    }
    if (kind == "threshold" && !(v > 0)) {
      diag_.error(p, where,
                  "threshold " + format_number(v) + " must be positive" +
                      (threshold_owner_.empty()
                           ? std::string()
                           : " (method '" + threshold_owner_ +
                                 "' takes thresholds > 0; only dms takes thresholds of any sign)"));
      return false;
    }
    return true;
  }

  void certifications(Fields& top) {
    std::map<std::string, SourcePos> seen;
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> split_of;  // benchmark -> split
    std::map<std::string, std::string> split_owner;
    for (const auto& entry : table_array(top, "certification", false)) {
      const toml::table* t = entry.first;
      const std::size_t i = entry.second;
      const std::string prefix = "certification[" + std::to_string(i) + "]";
      Fields f(*t, prefix, diag_);
      Certification c;
      c.pos = f.pos();
      if (auto v = name_field(f, "name", "certification", seen)) c.name = *v;
      const Grid* grid = nullptr;
      if (auto v = f.string("grid", true)) {
        grid = m_.find_grid(*v);
        if (!grid)
          diag_.error(pos_of(*t->get("grid")), f.field("grid"), "no grid named '" + *v + "'");
        c.grid = *v;
      }
      auto in_grid = [&](const char* key, const std::vector<std::string>* list,
                         const char* what) -> std::optional<std::string> {
        auto v = f.string(key, true);
        if (!v || !grid) return v;
        if (std::find(list->begin(), list->end(), *v) == list->end()) {
          diag_.error(pos_of(*t->get(key)), f.field(key),
                      std::string(what) + " '" + *v + "' is not in grid '" + grid->name + "' (" +
                          join(*list) + ")");
          return std::nullopt;
        }
        return v;
      };
      auto bench = in_grid("benchmark", grid ? &grid->benchmarks : nullptr, "benchmark");
      auto meth = in_grid("method", grid ? &grid->methods : nullptr, "method");
      auto proto = in_grid("protocol", grid ? &grid->protocols : nullptr, "protocol");
      const std::string backend_key = renamed_key(*t, f, "attention_backend", "backend");
      auto back =
          in_grid(backend_key.c_str(), grid ? &grid->backends : nullptr, "attention backend");
      if (bench) c.benchmark = *bench;
      if (meth) c.method = *meth;
      if (proto) c.protocol = *proto;
      if (back) c.backend = *back;
      candidates(f, grid, meth ? m_.find_method(*meth) : nullptr, c);
      const bool risks_ok = risks(f, *t, c);
      // When the risks are in error, tau is checked but not required (no follow-on errors).
      if (!risks_ok || c.has_risk("violation")) {
        if (auto v = f.real("tau", risks_ok)) {
          if (!(*v > 0 && *v <= 1))
            diag_.error(pos_of(*t->get("tau")), f.field("tau"),
                        format_number(*v) + " is outside (0, 1] (utilities lie in [0, 1])");
          c.tau = *v;
        }
      } else if (const toml::node* n = f.get("tau", false)) {
        diag_.error(pos_of(*n), f.field("tau"),
                    "tau defines the violation risk, which this block does not certify (risks: " +
                        join(c.risks) + "); remove it");
      }
      for (const char* key : {"epsilon", "delta"}) {
        if (auto v = f.real(key, true)) {
          if (!(*v > 0 && *v < 1))
            diag_.error(pos_of(*t->get(key)), f.field(key),
                        format_number(*v) + " is outside (0, 1)");
          (std::string(key) == "epsilon" ? c.epsilon : c.delta) = *v;
        }
      }
      if (auto v = f.integer("calibration", true, 1, 1000000)) c.calibration = *v;
      if (auto v = f.integer("test", true, 0, 1000000)) c.test = *v;
      const Benchmark* b = bench ? m_.find_benchmark(*bench) : nullptr;
      if (b && c.calibration > 0 && c.calibration + c.test > b->instances) {
        diag_.error(f.pos(), prefix,
                    "calibration + test = " + std::to_string(c.calibration + c.test) +
                        " instances per task, but benchmark '" + b->name + "' has " +
                        std::to_string(b->instances));
      }
      if (b && c.calibration > 0) {
        auto it = split_of.find(b->name);
        if (it == split_of.end()) {
          split_of[b->name] = {c.calibration, c.test};
          split_owner[b->name] = prefix;
        } else if (it->second != std::make_pair(c.calibration, c.test)) {
          diag_.error(f.pos(), prefix,
                      "calibration/test split " + std::to_string(c.calibration) + "/" +
                          std::to_string(c.test) + " differs from " + split_owner[b->name] + " (" +
                          std::to_string(it->second.first) + "/" +
                          std::to_string(it->second.second) + ") on benchmark '" + b->name +
                          "'; a benchmark's instances are split once");
        }
      }
      contract_kind(f, *t, c, risks_ok);
      f.finish(
          "name, grid, benchmark, method, protocol, attention_backend, candidates, tau, epsilon, "
          "delta, calibration, test, risk, risks, bound, loss_epsilon, procedure, starts, "
          "per_task, sequential");
      m_.certifications.push_back(std::move(c));
    }
  }

  // `risk = "R"` or `risks = ["R", ...]` (certified jointly), stored in kCertificationRisks
  // order. Returns false when neither could be read (the block is already in error).
  bool risks(Fields& f, const toml::table& t, Certification& c) {
    const toml::node* single = t.get("risk");
    const toml::node* list = t.get("risks");
    if (single && list) {
      f.get("risk", false);
      f.get("risks", false);
      diag_.error(pos_of(*list), f.field("risks"),
                  "give either risk (one risk) or risks (several, certified jointly), not both");
      return false;
    }
    std::vector<std::string> chosen;
    if (single) {
      auto v = f.choice("risk", false, kCertificationRisks, "risk");
      if (!v) return false;
      chosen = {*v};
    } else if (list) {
      auto v = f.string_set("risks", false, "risk",
                            [&](const std::string& r, SourcePos p, const std::string& where) {
                              return member(r, p, where, kCertificationRisks, "risk");
                            });
      if (!v) return false;
      chosen = *v;
    } else {
      return true;  // the default: {"violation"}
    }
    c.risks.clear();
    for (const char* r : kCertificationRisks)
      if (std::find(chosen.begin(), chosen.end(), r) != chosen.end()) c.risks.push_back(r);
    return true;
  }

  // bound, loss_epsilon, procedure, starts, per_task, sequential (after candidates, risks and
  // epsilon).
  void contract_kind(Fields& f, const toml::table& t, Certification& c, bool risks_ok) {
    if (!risks_ok) {  // bound and loss_epsilon depend on the risks: no follow-on errors
      f.get("bound", false);
      f.get("loss_epsilon", false);
    }
    const bool mean_loss = c.has_risk("mean_loss");
    const bool joint = mean_loss && c.has_risk("violation");
    if (mean_loss) {
      c.bound = "hoeffding_bentkus";
      if (auto v = f.choice("bound", false, kLossBounds, "mean-loss bound")) c.bound = *v;
    } else if (const toml::node* n = f.get("bound", false); n && risks_ok) {
      diag_.error(
          pos_of(*n), f.field("bound"),
          "a bound applies to the mean_loss risk only (this block's risks: " + join(c.risks) +
              "; allowed bounds with risk = \"mean_loss\": " +
              join(std::vector<std::string>(std::begin(kLossBounds), std::end(kLossBounds))) + ")");
    }
    if (mean_loss) c.loss_epsilon = c.epsilon;
    if (joint) {
      if (auto v = f.real("loss_epsilon", false)) {
        if (!(*v > 0 && *v < 1))
          diag_.error(pos_of(*t.get("loss_epsilon")), f.field("loss_epsilon"),
                      format_number(*v) + " is outside (0, 1)");
        c.loss_epsilon = *v;
      }
    } else if (const toml::node* n = f.get("loss_epsilon", false); n && risks_ok) {
      diag_.error(pos_of(*n), f.field("loss_epsilon"),
                  mean_loss ? std::string("with mean_loss as the only risk its level is epsilon; "
                                          "loss_epsilon is for risks = [\"violation\", "
                                          "\"mean_loss\"]")
                            : "loss_epsilon is the level of the mean_loss risk, which this block "
                              "does not certify (risks: " +
                                  join(c.risks) + ")");
    }
    bool procedure_known = true;
    if (auto v = f.choice("procedure", false, kCertificationProcedures, "procedure"))
      c.procedure = *v;
    else if (t.get("procedure"))
      procedure_known = false;  // in error: starts is not judged against it
    const std::int64_t candidates = static_cast<std::int64_t>(c.candidates.size());
    if (c.procedure == "fixed_sequence_multistart") {
      if (auto v = f.integer("starts", true, std::numeric_limits<std::int64_t>::min(),
                             std::numeric_limits<std::int64_t>::max())) {
        if (*v < 1 || (candidates > 0 && *v > candidates))
          diag_.error(pos_of(*t.get("starts")), f.field("starts"),
                      std::to_string(*v) + " start points is outside [1, " +
                          (candidates > 0 ? std::to_string(candidates) + "] (the block's " +
                                                std::to_string(candidates) + " candidates)"
                                          : std::string("number of candidates]")));
        else
          c.starts = *v;
      }
    } else if (const toml::node* n = f.get("starts", false); n && procedure_known) {
      diag_.error(pos_of(*n), f.field("starts"),
                  "starts applies to procedure = \"fixed_sequence_multistart\" only (this "
                  "block's procedure: " +
                      c.procedure + ")");
    }
    for (const char* key : {"per_task", "sequential"}) {
      const toml::node* n = f.get(key, false);
      if (!n) continue;
      if (!n->is_boolean()) {
        diag_.error(pos_of(*n), f.field(key), "expected true or false, found " + type_phrase(*n));
        continue;
      }
      (std::string(key) == "per_task" ? c.per_task : c.sequential) = n->as_boolean()->get();
    }
    // The anytime-valid test certifies one aggregate risk along a fixed sequence
    // (docs/design/sequential.md); other contracts would be replayed under the wrong rule.
    if (c.sequential && risks_ok && procedure_known) {
      std::string why;
      if (joint)
        why = "a joint certificate of two risks";
      else if (c.per_task)
        why = "per_task = true";
      else if (c.procedure != "fixed_sequence")
        why = "procedure = \"" + c.procedure + "\"";
      if (!why.empty()) {
        diag_.error(pos_of(*t.get("sequential")), f.field("sequential"),
                    "sequential calibration certifies one aggregate risk along the fixed sequence; "
                    "it cannot be combined with " +
                        why);
      }
    }
  }

  void candidates(Fields& f, const Grid* grid, const MethodConfig* cfg, Certification& c) {
    const toml::array* a = f.array("candidates", true);
    if (!a) return;
    if (a->empty()) {
      diag_.error(pos_of(*a), f.field("candidates"),
                  "empty list; at least one candidate is needed");
      return;
    }
    std::string kind = "retention";
    const std::vector<double>* allowed = nullptr;
    bool decreasing_threshold = false;  // simlayerkv: a larger threshold keeps more
    if (grid && cfg) {
      const mc::MethodSpec* spec = mc::find_method(cfg->method);
      if (spec->axis == mc::BudgetAxis::threshold) {
        kind = "threshold";
        allowed = &grid->thresholds;
        decreasing_threshold = spec->larger_threshold_keeps_more;
      } else if (grid->ratio_kind) {
        kind = *grid->ratio_kind == RatioKind::compression ? "compression" : "retention";
        allowed = &grid->ratios;
      }
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string where = f.field("candidates") + "[" + std::to_string(i) + "]";
      auto v = f.as_real(e, where);
      if (!v) continue;
      if (!budget_in_range(*v, kind, pos_of(e), where)) continue;
      if (allowed && std::find(allowed->begin(), allowed->end(), *v) == allowed->end()) {
        diag_.error(pos_of(e), where,
                    kind + " " + format_number(*v) + " is not in the " + kind + " list of grid '" +
                        grid->name + "'");
        continue;
      }
      if (!c.candidates.empty()) {
        const double prev = c.candidates.back();
        // Conservative -> aggressive: retention decreases; compression and T increase (the
        // threshold decreases for methods where a larger one keeps more, e.g. simlayerkv).
        const bool decreasing = kind == "retention" || decreasing_threshold;
        const bool ordered = decreasing ? *v < prev : *v > prev;
        if (!ordered) {
          diag_.error(pos_of(e), where,
                      format_number(*v) + " after " + format_number(prev) +
                          ": candidates must go strictly from conservative to aggressive (" +
                          (decreasing ? "decreasing " + kind : "increasing " + kind) + ")");
          continue;
        }
      }
      c.candidates.push_back(*v);
    }
  }

  void statistics(Fields& top) {
    m_.statistics.seed = m_.study.seed;
    const toml::table* t = sub_table(top, "statistics", false);
    if (!t) return;
    Fields f(*t, "statistics", diag_);
    if (auto v = f.integer("bootstrap_resamples", false, 1, 100000000))
      m_.statistics.bootstrap_resamples = *v;
    if (auto v = f.integer("seed", false, 0, std::numeric_limits<std::int64_t>::max()))
      m_.statistics.seed = static_cast<std::uint64_t>(*v);
    if (auto v = f.real("alpha", false)) {
      if (!(*v > 0 && *v < 1))
        diag_.error(pos_of(*t->get("alpha")), "statistics.alpha",
                    format_number(*v) + " is outside (0, 1)");
      m_.statistics.alpha = *v;
    }
    std::map<std::string, SourcePos> seen;
    for (const auto& entry : table_array(f, "families", false)) {
      const toml::table* ft = entry.first;
      const std::size_t i = entry.second;
      Fields ff(*ft, "statistics.families[" + std::to_string(i) + "]", diag_);
      Family fam;
      fam.pos = ff.pos();
      if (auto v = name_field(ff, "name", "family", seen)) fam.name = *v;
      if (auto v = ff.choice("analysis", true, kAnalyses, "analysis")) fam.analysis = *v;
      if (auto v = ff.string_set("over", true, "dimension",
                                 [&](const std::string& d, SourcePos p, const std::string& w) {
                                   if (!member(d, p, w, kDimensions, "dimension")) return false;
                                   if ((fam.analysis == "protocol_gap" && d == "protocol") ||
                                       (fam.analysis == "backend_confound" &&
                                        (d == "backend" || d == "method" || d == "budget"))) {
                                     diag_.error(p, w,
                                                 "a " + fam.analysis +
                                                     " family cannot range over '" + d +
                                                     "': the analysis compares along it");
                                     return false;
                                   }
                                   return true;
                                 }))
        fam.over = *v;
      ff.finish("name, analysis, over");
      m_.statistics.families.push_back(std::move(fam));
    }
    f.finish("bootstrap_resamples, seed, alpha, families");
  }

  void sharding(Fields& top) {
    const toml::table* t = sub_table(top, "sharding", false);
    if (!t) return;
    Fields f(*t, "sharding", diag_);
    if (auto v = f.integer("flush_every", false, 1, 1000000)) m_.sharding.flush_every = *v;
    if (auto v = f.integer("records_per_shard", false, 0, std::numeric_limits<std::int64_t>::max()))
      m_.sharding.records_per_shard = *v;
    f.finish("flush_every, records_per_shard");
  }

  const toml::table& root_;
  Manifest& m_;
  Diagnostics& diag_;
  // While a grid's thresholds are read: its first threshold method that needs thresholds > 0.
  std::string threshold_owner_;
};

// Same method and parameters under two names would be the same cells twice.
void check_distinct_configs(const Manifest& m, Diagnostics& diag) {
  std::map<std::string, const MethodConfig*> seen;
  for (const auto& cfg : m.methods) {
    const std::string key = canonical_method(m, cfg).dump();
    auto [it, fresh] = seen.emplace(key, &cfg);
    if (!fresh) {
      diag.error(cfg.pos, "methods." + cfg.name,
                 "same method and parameters as methods." + it->second->name + " (line " +
                     std::to_string(it->second->pos.line) +
                     "); one configuration would be run twice");
    }
  }
}

template <typename T>
void sort_by_name(std::vector<T>& v) {
  std::sort(v.begin(), v.end(), [](const T& a, const T& b) { return a.name < b.name; });
}

}  // namespace

Manifest parse_manifest(std::string_view text, const std::filesystem::path& file) {
  Diagnostics diag(file.string());
  toml::table root;
  try {
    root = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    diag.error(pos_of(e.source()), "", "TOML syntax error: " + std::string(e.description()));
    diag.throw_if_any();
  }
  Manifest m;
  m.file = file;
  Parser(root, m, diag).run();
  sort_by_name(m.models);
  sort_by_name(m.benchmarks);
  sort_by_name(m.grids);
  sort_by_name(m.certifications);
  sort_by_name(m.statistics.families);
  if (diag.empty()) check_distinct_configs(m, diag);
  if (diag.empty()) check_method_windows(m, diag);
  diag.throw_if_any();
  return m;
}

Manifest load_manifest(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw InputError(
        file.string() + ": cannot read the manifest (" +
        (std::filesystem::exists(file) ? "permission denied or not a file" : "no such file") + ")");
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_manifest(ss.str(), file);
}

}  // namespace kvaudit::manifest

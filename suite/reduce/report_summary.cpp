// The Summary sentences of report.md (see report_summary.h).
#include "suite/reduce/report_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

namespace kvaudit::reduce {
namespace {

// Typed, formatted access to a table's cells by column name.
class Cells {
 public:
  explicit Cells(const Table& t) : t_(t) {}
  const Table& table() const { return t_; }
  std::size_t rows() const { return t_.rows.size(); }
  bool has(const std::string& col) const {
    for (const auto& c : t_.columns)
      if (c.name == col) return true;
    return false;
  }
  const Value& value(std::size_t r, const std::string& col) const {
    return t_.rows[r][t_.column_index(col)];
  }
  // A real (or integer) value; nullopt when not applicable.
  std::optional<double> real(std::size_t r, const std::string& col) const {
    const Value& v = value(r, col);
    if (const auto* d = std::get_if<double>(&v))
      return std::isfinite(*d) ? std::optional<double>(*d) : std::nullopt;
    if (const auto* n = std::get_if<std::int64_t>(&v)) return static_cast<double>(*n);
    return std::nullopt;
  }
  std::string text(std::size_t r, const std::string& col) const {
    const Value& v = value(r, col);
    if (const auto* s = std::get_if<std::string>(&v)) return *s;
    return "";
  }
  // A number as report.md shows it in this column.
  std::string shown(double x, const std::string& col) const {
    const Column& c = t_.columns[t_.column_index(col)];
    if (c.type == ColumnType::integer) return std::to_string(static_cast<std::int64_t>(x));
    if (c.type == ColumnType::pvalue) return format_p(x);
    return format_fixed(x, c.digits);
  }
  std::string shown(std::size_t r, const std::string& col) const {
    const auto x = real(r, col);
    return x ? shown(*x, col) : std::string("—");
  }
  bool partial(std::size_t r) const {
    if (t_.partial_column < 0) return false;
    const auto* b = std::get_if<bool>(&t_.rows[r][static_cast<std::size_t>(t_.partial_column)]);
    return b != nullptr && *b;
  }

 private:
  const Table& t_;
};

SummarySentence sentence(const Table& t, std::string text) {
  return {std::move(text), t.id, t.title};
}

// "[lo, hi], which lies entirely above 0" etc., from the family interval columns.
std::string family_interval(const Cells& c, std::size_t r) {
  const auto lo = c.real(r, "family_lower");
  const auto hi = c.real(r, "family_upper");
  std::string out =
      "family interval [" + c.shown(r, "family_lower") + ", " + c.shown(r, "family_upper") + "]";
  if (!lo || !hi) return out;
  if (*lo > 0) return out + ", which lies entirely above 0";
  if (*hi < 0) return out + ", which lies entirely below 0";
  return out + ", which includes 0";
}

bool excludes_zero(const Cells& c, std::size_t r) {
  const auto lo = c.real(r, "family_lower");
  const auto hi = c.real(r, "family_upper");
  return lo && hi && (*lo > 0 || *hi < 0);
}

// The partial clause of a sentence about the row with the largest value: the row itself, or the
// table the maximum was taken over (a partial row might hold a larger value once complete).
std::string max_partial_clause(const Cells& c, std::size_t r) {
  if (c.partial(r)) return "; partial: computed from groups with missing or failed cells";
  const std::size_t partial = c.table().partial_rows();
  if (partial == 0) return "";
  return "; partial: the largest of " + std::to_string(c.rows()) + " rows, " +
         std::to_string(partial) + " of them computed from groups with missing or failed cells";
}

std::string plural(std::size_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string join_as_list(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += (i == 0                  ? ""
            : i + 1 == parts.size() ? (parts.size() > 2 ? ", and " : " and ")
                                    : ", ") +
           parts[i];
  return out;
}

// (a) Methods against the best-of-3 trivial baseline, per protocol.
void baseline_sentences(const Table& t, std::vector<SummarySentence>& out) {
  const Cells c(t);
  struct MethodRows {
    std::string method;
    std::size_t rows = 0, wins = 0, partial_wins = 0;
  };
  struct ProtocolRows {
    std::string protocol;
    std::vector<MethodRows> methods;  // first appearance order
    std::size_t rows = 0, partial = 0, empty = 0;
  };
  std::vector<ProtocolRows> protocols;
  for (std::size_t r = 0; r < c.rows(); ++r) {
    const std::string protocol = c.text(r, "protocol");
    const std::string method = c.text(r, "method");
    auto p = std::find_if(protocols.begin(), protocols.end(),
                          [&](const ProtocolRows& x) { return x.protocol == protocol; });
    if (p == protocols.end()) {
      protocols.push_back({protocol, {}, 0, 0, 0});
      p = protocols.end() - 1;
    }
    auto m = std::find_if(p->methods.begin(), p->methods.end(),
                          [&](const MethodRows& x) { return x.method == method; });
    if (m == p->methods.end()) {
      p->methods.push_back({method, 0, 0, 0});
      m = p->methods.end() - 1;
    }
    ++p->rows;
    ++m->rows;
    const bool partial = c.partial(r);
    if (partial) ++p->partial;
    const auto lo = c.real(r, "family_lower");
    if (!lo) {
      ++p->empty;
      continue;
    }
    if (*lo > 0) {  // strictly: an interval that touches 0 is not a win
      ++m->wins;
      if (partial) ++m->partial_wins;
    }
  }
  for (const auto& p : protocols) {
    std::vector<std::string> winners;
    for (const auto& m : p.methods) {
      if (m.wins == 0) continue;
      std::string w =
          m.method + " in " + std::to_string(m.wins) + " of " + plural(m.rows, "row", "rows");
      if (m.partial_wins > 0) w += " (" + std::to_string(m.partial_wins) + " partial)";
      winners.push_back(std::move(w));
    }
    std::string s = "Under " + p.protocol + ", ";
    if (winners.empty()) {
      s += "no method beat the best-of-3 trivial baseline: none of the " +
           plural(p.rows, "row", "rows") + " of " + plural(p.methods.size(), "method", "methods") +
           " has a family interval of Δ entirely above 0";
    } else {
      s += std::to_string(winners.size()) + " of " + plural(p.methods.size(), "method", "methods") +
           " beat the best-of-3 trivial baseline (a family interval of Δ entirely above 0) in at "
           "least one (model, backend, benchmark, budget) row: " +
           join_as_list(winners);
    }
    if (p.empty > 0)
      s += "; " + std::to_string(p.empty) + " of the " + plural(p.rows, "row has", "rows have") +
           " no usable pairs";
    if (p.partial > 0)
      s += "; partial: " + std::to_string(p.partial) + " of the " + std::to_string(p.rows) +
           " rows are computed from groups with missing or failed cells";
    out.push_back(sentence(t, s + "."));
  }
}

// The row with the largest value of `col` (|value| when `absolute`), first on ties.
std::optional<std::size_t> row_of_max(const Cells& c, const std::string& col, bool absolute) {
  std::optional<std::size_t> best;
  double best_value = 0;
  for (std::size_t r = 0; r < c.rows(); ++r) {
    const auto v = c.real(r, col);
    if (!v) continue;
    const double x = absolute ? std::fabs(*v) : *v;
    if (!best || x > best_value) {
      best = r;
      best_value = x;
    }
  }
  return best;
}

// ", one of N rows with that Δ" when other rows of `col` share row r's value (the sentence names
// the first; with all gaps 0 it must not read as if one method stood out), else "".
std::string tie_clause(const Cells& c, const std::string& col, std::size_t r) {
  const auto v = c.real(r, col);
  if (!v) return "";
  std::size_t same = 0;
  for (std::size_t i = 0; i < c.rows(); ++i)
    if (const auto x = c.real(i, col); x && *x == *v) ++same;
  return same > 1 ? " (the first of " + std::to_string(same) + " rows with this Δ)" : "";
}

// (b) The largest protocol gap, per budget and pooled.
void protocol_gap_sentences(const Table* per_budget, const Table* pooled,
                            std::vector<SummarySentence>& out) {
  if (per_budget != nullptr) {
    const Cells c(*per_budget);
    if (const auto r = row_of_max(c, "delta", false)) {
      std::string s = "The largest protocol gap Δ = U(query-aware) − U(query-agnostic) is " +
                      c.text(*r, "method") + " at " + c.text(*r, "budget") + " (" +
                      c.text(*r, "model") + ", " + c.text(*r, "backend") + ", " +
                      c.text(*r, "benchmark") + ")" + tie_clause(c, "delta", *r) +
                      ": Δ = " + c.shown(*r, "delta") + ", " + family_interval(c, *r);
      s += max_partial_clause(c, *r);
      out.push_back(sentence(*per_budget, s + "."));
    }
  }
  if (pooled != nullptr) {
    const Cells c(*pooled);
    if (const auto r = row_of_max(c, "delta", false)) {
      std::string s = "Pooled over models and budgets, the largest protocol gap is " +
                      c.text(*r, "method") + " (" + c.text(*r, "backend") + ", " +
                      c.text(*r, "benchmark") + ")" + tie_clause(c, "delta", *r) +
                      ": Δ = " + c.shown(*r, "delta") + ", " + family_interval(c, *r);
      s += max_partial_clause(c, *r);
      out.push_back(sentence(*pooled, s + "."));
    }
  }
}

// The smallest |Δ| the family interval allows when it excludes 0, else nullopt.
std::optional<double> nearest_end(const Cells& c, std::size_t r) {
  if (!excludes_zero(c, r)) return std::nullopt;
  const double lo = *c.real(r, "family_lower");
  const double hi = *c.real(r, "family_upper");
  return lo > 0 ? lo : -hi;
}

// Whether the shift exceeds the median inter-method gap even at the interval's end nearest 0.
bool exceeds_median_gap(const Cells& c, std::size_t r) {
  const auto near = nearest_end(c, r);
  const auto median = c.real(r, "median_method_gap");
  return near && median && *near > *median;
}

// (c) The backend shift of the uncompressed model against the inter-method gaps.
void backend_sentences(const Table& t, std::vector<SummarySentence>& out) {
  const Cells c(t);
  const auto r = row_of_max(c, "delta", true);
  if (!r) return;
  std::string s =
      "The largest backend shift of the uncompressed model, Δ = U(sdpa) − U(eager), "
      "is on " +
      c.text(*r, "model") + ", " + c.text(*r, "benchmark") + ", " + c.text(*r, "protocol") +
      ": Δ = " + c.shown(*r, "delta") + ", " + family_interval(c, *r) + "; ";
  const auto median = c.real(*r, "median_method_gap");
  const auto max = c.real(*r, "max_method_gap");
  const auto near = nearest_end(c, *r);
  if (!median || !max) {
    s += "there are no inter-method gaps to compare it with";
  } else {
    const std::string gaps = "(median " + c.shown(*median, "median_method_gap") + ", largest " +
                             c.shown(*max, "max_method_gap") + ")";
    if (near && *near > *max) {
      s += "even the interval's end nearest 0 (" + c.shown(*near, "family_lower") +
           ") exceeds every inter-method gap under sdpa " + gaps;
    } else if (near && *near > *median) {
      s += "the interval's end nearest 0 (" + c.shown(*near, "family_lower") +
           ") exceeds the median inter-method gap under sdpa but not the largest " + gaps;
    } else {
      s += "the interval does not show the shift exceeding the median inter-method gap under "
           "sdpa " +
           gaps;
    }
    if (const auto below = c.real(*r, "fraction_gaps_below"))
      s += "; a fraction " + c.shown(*below, "fraction_gaps_below") +
           " of the method gaps are smaller than |Δ|";
  }
  s += max_partial_clause(c, *r);
  out.push_back(sentence(t, s + "."));
  if (c.rows() < 2) return;
  std::size_t exceeding = 0, partial = 0;
  for (std::size_t i = 0; i < c.rows(); ++i) {
    if (exceeds_median_gap(c, i)) ++exceeding;
    if (c.partial(i)) ++partial;
  }
  std::string all = "In " + std::to_string(exceeding) + " of the " + std::to_string(c.rows()) +
                    " (model, benchmark, protocol) rows the backend shift exceeds the median "
                    "inter-method gap even at its family interval's end nearest 0";
  if (partial > 0)
    all += "; partial: " + std::to_string(partial) + " of the " + std::to_string(c.rows()) +
           " rows are computed from groups with missing or failed cells";
  out.push_back(sentence(t, all + "."));
}

// (d) Per certification block and model: the certified policy, or full KV, and the plug-in rule.
void certification_sentences(const Table& t, const Table* candidates,
                             std::vector<SummarySentence>& out) {
  const Cells c(t);
  // (block, model, candidate) → row of certification_candidates.
  std::map<std::tuple<std::string, std::string, std::string>, std::size_t> candidate_row;
  std::optional<Cells> cand;
  if (candidates != nullptr) {
    cand.emplace(*candidates);
    for (std::size_t r = 0; r < cand->rows(); ++r)
      candidate_row.emplace(
          std::tuple{cand->text(r, "block"), cand->text(r, "model"), cand->text(r, "candidate")},
          r);
  }
  for (std::size_t r = 0; r < c.rows(); ++r) {
    const std::string block = c.text(r, "block");
    const std::string model = c.text(r, "model");
    // The policy, its retention and its test risk (test mean loss for a block without the
    // violation risk).
    const auto policy = [&](const std::string& id, const std::string& risk_col,
                            const std::string& loss_col) {
      if (id == "full-kv") return std::string("full KV");
      std::string p = id;
      std::vector<std::string> facts;
      if (cand) {
        const auto it = candidate_row.find({block, model, id});
        if (it != candidate_row.end()) {
          if (const auto ret = cand->real(it->second, "retention"))
            facts.push_back("retention " + cand->shown(*ret, "retention"));
        }
      }
      if (const auto risk = c.real(r, risk_col)) {
        facts.push_back("test risk " + c.shown(*risk, risk_col));
      } else if (c.has(loss_col)) {
        if (const auto loss = c.real(r, loss_col))
          facts.push_back("test mean loss " + c.shown(*loss, loss_col));
      }
      for (std::size_t i = 0; i < facts.size(); ++i)
        p += (i == 0 ? " (" : ", ") + facts[i] + (i + 1 == facts.size() ? ")" : "");
      return p;
    };
    std::string s = "Certification block " + block + " (" + c.text(r, "method") + " on " +
                    c.text(r, "benchmark") + ", model " + model + "): ";
    const std::string note = c.text(r, "note");
    if (!note.empty()) {
      s += "not computed: " + note;
    } else {
      const std::string selected = c.text(r, "selected");
      const std::string plug_in = c.text(r, "plug_in");
      if (selected == "full-kv")
        s += "no candidate is certified, so the policy falls back to full KV";
      else
        s += "certifies " + policy(selected, "test_risk", "test_mean_loss");
      s += "; the plug-in rule (no guarantee) ";
      if (plug_in == selected)
        s += std::string("also picks ") + (plug_in == "full-kv" ? "full KV" : plug_in);
      else
        s += "picks " + policy(plug_in, "plug_in_test_risk", "plug_in_test_mean_loss");
    }
    if (c.partial(r)) s += "; partial: missing or failed cells were counted as violations";
    out.push_back(sentence(t, s + "."));
  }
}

}  // namespace

std::vector<SummarySentence> report_summary(const std::vector<Table>& tables) {
  std::vector<SummarySentence> out;
  const auto nonempty = [&](const char* id) -> const Table* {
    const Table* t = find_table(tables, id);
    return t != nullptr && !t->rows.empty() ? t : nullptr;
  };
  if (const Table* t = nonempty("baseline_wins")) baseline_sentences(*t, out);
  protocol_gap_sentences(nonempty("protocol_gap"), nonempty("protocol_gap_pooled"), out);
  if (const Table* t = nonempty("backend_confound")) backend_sentences(*t, out);
  if (const Table* t = nonempty("certification"))
    certification_sentences(*t, nonempty("certification_candidates"), out);
  return out;
}

std::string summary_text(const std::vector<SummarySentence>& sentences) {
  std::string out;
  for (const auto& s : sentences) out += s.text + "\n";
  return out;
}

}  // namespace kvaudit::reduce

// LaTeX booktabs writer (see latex_writer.h).
#include "suite/reduce/latex_writer.h"

#include <cstring>
#include <utility>

namespace kvaudit::reduce {
namespace {

// UTF-8 sequences the tables use and their LaTeX forms.
const std::pair<const char*, const char*> kUnicode[] = {
    {"Δ", "$\\Delta$"},   {"τ", "$\\tau$"},   {"ε", "$\\varepsilon$"},
    {"δ", "$\\delta$"},   {"α", "$\\alpha$"}, {"λ", "$\\lambda$"},
    {"—", "---"},         {"–", "--"},        {"−", "$-$"},
    {"†", "$^\\dagger$"}, {"≤", "$\\le$"},    {"≥", "$\\ge$"},
    {"×", "$\\times$"},   {"̂", ""},           {"…", "\\ldots{}"},
    {"√", "$\\surd$"},    {"→", "$\\to$"},    {"·", "$\\cdot$"},
    {"*", "$^*$"},
};

std::string number_text(const std::string& s) {
  if (!s.empty() && s[0] == '-') return "$-$" + s.substr(1);
  return s;
}

std::string p_text(const std::string& s) {
  const auto e = s.find('e');
  if (e == std::string::npos) return s;
  const std::string mantissa = s.substr(0, e);
  int exponent = std::stoi(s.substr(e + 1));
  return "$" + mantissa + "\\times 10^{" + std::to_string(exponent) + "}$";
}

std::string latex_cell_text(const Column& c, const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return "---";
  if (const auto* s = std::get_if<std::string>(&v)) return latex_escape(*s);
  if (const auto* n = std::get_if<std::int64_t>(&v)) return number_text(std::to_string(*n));
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "yes" : "no";
  const double d = std::get<double>(v);
  if (c.type == ColumnType::pvalue) return p_text(format_p(d));
  const std::string s = format_fixed(d, c.digits);
  return s.empty() ? "---" : number_text(s);
}

std::string attribute(const Table& t, const std::string& key) {
  for (const auto& [k, v] : t.attributes)
    if (k == key) return v;
  return "";
}

}  // namespace

std::string latex_escape(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    bool replaced = false;
    for (const auto& [from, to] : kUnicode) {
      const std::size_t n = std::strlen(from);
      if (text.compare(i, n, from) == 0) {
        out += to;
        i += n;
        replaced = true;
        break;
      }
    }
    if (replaced) continue;
    const char c = text[i++];
    switch (c) {
      case '\\':
        out += "\\textbackslash{}";
        break;
      case '&':
      case '%':
      case '$':
      case '#':
      case '_':
      case '{':
      case '}':
        out += '\\';
        out += c;
        break;
      case '~':
        out += "\\textasciitilde{}";
        break;
      case '^':
        out += "\\textasciicircum{}";
        break;
      case '<':
        out += "\\textless{}";
        break;
      case '>':
        out += "\\textgreater{}";
        break;
      default:
        out += c;
    }
  }
  return out;
}

void write_latex(std::ostream& out, const Table& t) {
  std::vector<std::size_t> cols;
  for (std::size_t i = 0; i < t.columns.size(); ++i)
    if (t.columns[i].in_latex) cols.push_back(i);
  std::string spec;
  for (std::size_t i : cols) spec += t.columns[i].type == ColumnType::text ? 'l' : 'r';
  const bool long_table = t.rows.size() > kLatexLongtableRows;

  std::string caption = latex_escape(t.title) + ".";
  const std::string family = attribute(t, "family");
  if (!family.empty()) {
    caption += " Family \\texttt{" + latex_escape(family) +
               "}, $m = " + latex_escape(attribute(t, "m")) +
               "$, $\\alpha = " + latex_escape(attribute(t, "alpha")) + "$.";
  }
  const std::string B = attribute(t, "bootstrap_resamples");
  if (!B.empty())
    caption += " Paired bootstrap, $B = " + B + "$, seed " +
               latex_escape(attribute(t, "bootstrap_seed")) + ", percentile intervals.";
  const std::size_t partial = t.partial_rows();
  if (partial > 0) caption += " $^\\dagger$: partial (computed from incomplete cells).";

  out << "% kvaudit table " << t.id << ": needs \\usepackage{booktabs}"
      << (long_table ? " and \\usepackage{longtable}" : "") << "\n";
  if (long_table) {
    out << "\\begin{longtable}{" << spec << "}\n\\caption{" << caption << "}\\label{tab:kvaudit-"
        << t.id << "}\\\\\n";
  } else {
    out << "\\begin{table}[t]\n\\centering\n\\small\n\\caption{" << caption
        << "}\n\\label{tab:kvaudit-" << t.id << "}\n\\begin{tabular}{" << spec << "}\n";
  }
  out << "\\toprule\n";
  std::string header;
  for (std::size_t k = 0; k < cols.size(); ++k)
    header += (k ? " & " : "") + latex_escape(t.columns[cols[k]].header);
  out << header << " \\\\\n\\midrule\n";
  if (long_table) out << "\\endfirsthead\n\\toprule\n" << header << " \\\\\n\\midrule\n\\endhead\n";
  for (const auto& row : t.rows) {
    bool is_partial = false;
    if (t.partial_column >= 0) {
      const auto* b = std::get_if<bool>(&row[static_cast<std::size_t>(t.partial_column)]);
      is_partial = b != nullptr && *b;
    }
    for (std::size_t k = 0; k < cols.size(); ++k) {
      out << (k ? " & " : "") << latex_cell_text(t.columns[cols[k]], row[cols[k]]);
      if (k == 0 && is_partial) out << "$^\\dagger$";
    }
    out << " \\\\\n";
  }
  out << "\\bottomrule\n";
  if (long_table)
    out << "\\end{longtable}\n";
  else
    out << "\\end{tabular}\n\\end{table}\n";
}

}  // namespace kvaudit::reduce

// report.md writer (see report_markdown.h).
#include "suite/reduce/report_markdown.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "base/errors.h"
#include "suite/reduce/markdown_table.h"

namespace kvaudit::reduce {
namespace {

constexpr const char* kSummaryHeading = "Summary";

// Every heading report.md writes, in order, for the anchors of the tables' headings (a renderer
// suffixes a repeated anchor with -1, -2, …): table id → anchor.
std::map<std::string, std::string> table_anchors(const ReportDocument& doc) {
  std::map<std::string, int> seen;
  std::map<std::string, std::string> out;
  const auto anchor = [&](const std::string& heading) {
    const std::string base = markdown_anchor(heading);
    const int n = seen[base]++;
    return n == 0 ? base : base + "-" + std::to_string(n);
  };
  anchor(doc.title);
  if (doc.coverage != nullptr) anchor("Coverage");
  if (!doc.warnings.empty()) anchor("Warnings");
  if (!doc.summary.empty()) anchor(kSummaryHeading);
  for (const auto& s : doc.sections) {
    anchor(s.heading);
    for (const auto* t : s.tables) out.emplace(t->id, anchor(t->title));
    for (const auto* f : s.figures) anchor("Figure: " + f->title);
  }
  return out;
}

}  // namespace

std::string markdown_anchor(const std::string& heading) {
  std::string out;
  for (std::size_t i = 0; i < heading.size(); ++i) {
    const auto c = static_cast<unsigned char>(heading[i]);
    if (c >= 0x80) {
      // A UTF-8 sequence: letters (Greek, accented Latin) stay; U+2000–U+2FFF (dashes, daggers,
      // ellipses, mathematical operators, arrows) are punctuation and go.
      std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      len = std::min(len, heading.size() - i);
      if (c == 0xCE && len == 2) {  // Greek capitals U+0391–U+03A9 in lower case
        const auto d = static_cast<unsigned char>(heading[i + 1]);
        if (d >= 0x91 && d <= 0x9F) {
          out += {static_cast<char>(0xCE), static_cast<char>(d + 0x20)};
        } else if (d >= 0xA0 && d <= 0xA9) {
          out += {static_cast<char>(0xCF), static_cast<char>(d - 0x20)};
        } else {
          out.append(heading, i, len);
        }
      } else if (c != 0xE2) {
        out.append(heading, i, len);
      }
      i += len - 1;
    } else if (c >= 'A' && c <= 'Z') {
      out += static_cast<char>(c - 'A' + 'a');
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '-';
    }
  }
  return out;
}

void write_report_markdown(const std::filesystem::path& file, const ReportDocument& doc) {
  std::ostringstream out;
  out << "# " << doc.title << "\n\n";
  for (const auto& [k, v] : doc.provenance)
    out << "- **" << k << "**: " << markdown_escape(v) << "\n";
  out << "\nWhat every table and figure means and how each number is computed: docs/REPORT.md "
         "in the kvaudit sources.\n\n";
  if (doc.coverage != nullptr) {
    const Coverage& c = *doc.coverage;
    out << "## Coverage\n\n";
    if (c.complete && c.total.failed == 0) {
      out << "Complete: all " << c.total.expected
          << " preregistered cells are recorded exactly once (" << c.total.ok << " scored, "
          << c.total.excluded << " excluded by the tokenizer check).\n\n";
    } else {
      out << "**PARTIAL.** Of " << c.total.expected << " preregistered cells, " << c.total.missing
          << " are missing and " << c.total.failed
          << " failed. Every number computed from a group with a missing or failed cell is "
             "marked partial († in the tables, `partial` = true in the CSV and summary.h5). The "
             "missing cells are listed in tables/missing_cells.csv.\n\n";
    }
    if (c.reuse)
      out << "- Reuse cells count once per question of their context (one record each).\n";
    if (c.duplicates > 0)
      out << "- " << c.duplicates
          << " cells are recorded in more than one published shard; each is counted once.\n";
    if (c.unexpected > 0)
      out << "- " << c.unexpected
          << " records belong to no cell of the manifest's expansion and are ignored.\n";
    if (c.salvaged > 0)
      out << "- " << c.salvaged << " records were salvaged from unpublished shards (--salvage).\n";
    out << "\n";
  }
  if (!doc.warnings.empty()) {
    out << "## Warnings\n\n";
    for (const auto& w : doc.warnings) out << "- " << markdown_escape(w) << "\n";
    out << "\n";
  }
  if (!doc.summary.empty()) {
    // Plain sentences from the tables below (report_summary.h); each links its table and CSV.
    const auto anchors = table_anchors(doc);
    out << "## " << kSummaryHeading << "\n\n";
    for (const auto& s : doc.summary) {
      out << "- " << markdown_escape(s.text) << " (";
      if (const auto it = anchors.find(s.table_id); it != anchors.end())
        out << "table [" << markdown_escape(s.table_title) << "](#" << it->second << "), ";
      out << "[CSV](tables/" << s.table_id << ".csv))\n";
    }
    out << "\n";
  }
  for (const auto& s : doc.sections) {
    out << "## " << s.heading << "\n\n";
    if (!s.intro.empty()) out << s.intro << "\n\n";
    for (const auto* t : s.tables) {
      const std::string latex =
          doc.latex_written && t->write_latex ? "tables/" + t->id + ".tex" : "";
      write_markdown_table(out, *t, "tables/" + t->id + ".csv", latex);
    }
    for (const auto* f : s.figures) {
      out << "### Figure: " << f->title << "\n\n";
      if (f->png)
        out << "![" << markdown_escape(f->title) << "](figures/" << f->name << ".png)\n\n";
      out << f->caption << " Files: figures/" << f->name << ".png, .svg, .gp (script), .dat "
          << "(data).";
      if (!f->message.empty()) out << " **Not rendered:** " << f->message << ".";
      out << "\n\n";
    }
  }
  std::ofstream f(file, std::ios::binary);
  f << out.str();
  f.close();
  if (!f) throw InternalError("cannot write " + file.string());
}

}  // namespace kvaudit::reduce

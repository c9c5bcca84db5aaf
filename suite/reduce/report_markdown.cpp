// report.md writer (see report_markdown.h).
#include "suite/reduce/report_markdown.h"

#include <fstream>
#include <sstream>

#include "base/errors.h"
#include "suite/reduce/markdown_table.h"

namespace kvaudit::reduce {

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

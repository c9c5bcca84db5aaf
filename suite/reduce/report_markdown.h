// report.md: the human-readable report. Sections: the study and how it was reduced (manifest hash,
// kvaudit version, B, seed, quantile rule, α), coverage (complete, or what is missing and that
// every affected number is marked partial), warnings, the Summary (plain sentences generated from
// the tables' numbers, each linking its table: report_summary.h), exclusions and failures, then
// one section per analysis with its tables (Markdown, linking the CSV and LaTeX files) and
// figures. docs/REPORT.md explains every table and figure.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "suite/reduce/coverage.h"
#include "suite/reduce/figure_files.h"
#include "suite/reduce/report_summary.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct ReportSection {
  std::string heading;
  std::string intro;
  std::vector<const Table*> tables;
  std::vector<const RenderedFigure*> figures;
};

struct ReportDocument {
  std::string title;
  std::vector<std::pair<std::string, std::string>> provenance;  // key, value lines at the top
  const Coverage* coverage = nullptr;
  std::vector<std::string> warnings;  // shown prominently after the provenance
  // The Summary section after the warnings (report_summary.h); none when empty.
  std::vector<SummarySentence> summary;
  std::vector<ReportSection> sections;
  bool latex_written = true;
};

// The anchor a Markdown renderer gives a heading (GitHub's rule: lower case, punctuation removed,
// spaces as hyphens); report.md links its Summary sentences to the tables' headings with it.
std::string markdown_anchor(const std::string& heading);

void write_report_markdown(const std::filesystem::path& file, const ReportDocument& doc);

}  // namespace kvaudit::reduce

// The report's figures as gnuplot scripts and data (rendered by figure_files.h):
//   risk_<benchmark>_<model>: certification risk vs retention, a line per certified method
//     (calibration risk solid, test risk dashed), the ε line, and the selected (certified) policy
//     circled (full-KV fallbacks sit at retention 1, risk 0);
//   gap_pooled_<benchmark>_<backend>: protocol gap Δ per method, pooled over models and budgets,
//     with its 95% percentile interval;
//   gap_<benchmark>_<backend>_<model>: Δ vs compression per method with 95% intervals;
//   accuracy_<benchmark>_<backend>_<model>: mean utility vs compression per method, one panel per
//     protocol, full KV as a dashed line.
// Every method keeps its colour (line type = method index) across figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "suite/reduce/accuracy.h"
#include "suite/reduce/analysis_context.h"
#include "suite/reduce/certification_analysis.h"
#include "suite/reduce/protocol_gap.h"

namespace kvaudit::reduce {

struct Figure {
  std::string name;     // file stem: [a-z0-9_.-]
  std::string title;    // one line, for report.md
  std::string caption;  // what it shows, for report.md
  std::string data;     // <name>.dat (gnuplot data blocks separated by two blank lines)
  std::string plot;     // gnuplot commands drawing the figure (run once per terminal)
  int width = 960;
  int height = 600;
};

std::vector<Figure> build_figures(const AnalysisContext& ctx, const Accuracy& accuracy,
                                  const ProtocolGap& gap, const Certification& certification);

// A file-name-safe form of a name ("Llama-3.1 8B" -> "llama-3.1_8b").
std::string file_stem(const std::string& name);

// A method's gnuplot line type, the same in every figure (full KV, method −1, is 1).
inline int method_line_type(std::int16_t method) { return method < 0 ? 1 : method + 2; }

}  // namespace kvaudit::reduce

// `kvaudit reduce` as a library call: load and check the study (study_loader.h), match records to
// cells (study_frame.h), coverage, exclusions, the five analyses (accuracy, protocol gap, baseline
// wins, backend confound, certification), the costs (cost_analysis.h), and the report: report.md,
// summary.txt (the Summary's sentences, report_summary.h), tables/*.csv, tables/*.tex, summary.h5
// and figures/ (gnuplot), written to a temporary directory and published as <results>/report (or
// report-2, … when earlier reports exist; none is ever replaced).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "suite/reduce/accuracy.h"
#include "suite/reduce/backend_confound.h"
#include "suite/reduce/baseline_wins.h"
#include "suite/reduce/certification_analysis.h"
#include "suite/reduce/cost_analysis.h"
#include "suite/reduce/coverage.h"
#include "suite/reduce/exclusions.h"
#include "suite/reduce/figure_files.h"
#include "suite/reduce/protocol_gap.h"
#include "suite/reduce/report_summary.h"
#include "suite/reduce/study_frame.h"
#include "suite/reduce/study_loader.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {

struct ReduceOptions {
  LoadOptions load;
  std::optional<std::int64_t> resamples;  // overrides the manifest's bootstrap_resamples
  std::optional<std::uint64_t> seed;      // overrides the manifest's statistics seed
  int threads = 0;                        // bootstrap threads; 0 = all hardware threads
  bool figures = true;                    // run gnuplot
  std::ostream* log = nullptr;            // progress lines (stderr in the CLI), or none
};

struct PhaseTime {
  std::string phase;
  double seconds = 0;      // wall clock
  double cpu_seconds = 0;  // process CPU time, all threads
};

struct ReduceResult {
  std::unique_ptr<LoadedStudy> study;
  std::unique_ptr<StudyFrame> frame;
  Coverage coverage;
  ExclusionSummary exclusions;
  BootstrapSettings bootstrap;
  Accuracy accuracy;
  ProtocolGap protocol_gap;
  BaselineWins baseline_wins;
  BackendConfound backend_confound;
  Certification certification;
  CostAnalysis costs;
  std::vector<Table> tables;
  std::vector<SummarySentence> summary;  // report.md's Summary and summary.txt, from `tables`
  std::vector<RenderedFigure> figures;
  std::filesystem::path report_dir;
  std::vector<std::string> warnings;
  std::vector<PhaseTime> timings;
  bool complete() const { return coverage.complete && coverage.total.failed == 0; }
};

// Throws InputError for bad input (exit 1: nothing is written) and InternalError for failures of
// the environment (exit 2: the temporary report directory is removed).
ReduceResult reduce_study(const ReduceOptions& options);

}  // namespace kvaudit::reduce

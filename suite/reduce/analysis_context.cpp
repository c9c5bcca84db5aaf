// The analyses' shared inputs (see analysis_context.h).
#include "suite/reduce/analysis_context.h"

namespace kvaudit::reduce {

AnalysisContext::AnalysisContext(const StudyFrame& f, const CellLookup& l,
                                 const std::vector<LockedFamily>& fams, double family_alpha,
                                 BootstrapSettings settings)
    : frame(f), lookup(l), families(fams), alpha(family_alpha), bootstrap(settings) {
  task_sizes.reserve(f.tasks.size());
  for (const auto& t : f.tasks) task_sizes.push_back(t.instances);
}

std::string AnalysisContext::label(Dim d, std::int64_t code) const {
  const manifest::Manifest& m = frame.manifest();
  const auto i = static_cast<std::size_t>(code);
  switch (d) {
    case Dim::model:
      return m.models[i].name;
    case Dim::backend:
      return manifest::kAttentionBackendNames[i];
    case Dim::benchmark:
      return m.benchmarks[i].name;
    case Dim::task:
      return frame.tasks[i].qualified;
    case Dim::protocol:
      return manifest::kProtocolNames[i];
    case Dim::method:
      return code < 0 ? std::string("full") : m.methods[i].name;
    case Dim::budget:
      return frame.budgets[i].label;
  }
  return "";
}

}  // namespace kvaudit::reduce

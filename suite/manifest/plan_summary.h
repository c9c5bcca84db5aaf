// What `kvaudit plan` reports about an expansion: counts of units and cells by model, backend,
// protocol and method, a cost estimate, certification blocks with their n, and the size m of every
// declared Bonferroni family. The same numbers go into prereg.json.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest.h"

namespace kvaudit::manifest {

struct FamilySize {
  std::string name;
  std::string analysis;
  std::vector<std::string> over;
  std::int64_t m = 0;         // number of comparisons in the family
  double alpha = 0;           // family-wise level
  double per_comparison = 0;  // alpha / m (Bonferroni)
};

struct CertificationSize {
  std::string name;
  std::vector<std::string> models;
  std::int64_t tasks = 0;
  std::int64_t n_calibration = 0;  // per model: tasks x calibration
  std::int64_t n_test = 0;
};

struct PlanSummary {
  std::string manifest_sha256;
  std::int64_t units = 0;
  std::int64_t cells = 0;
  std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, std::int64_t>>
      by_model_backend;  // (model, backend) -> (units, cells)
  std::map<std::string, std::int64_t> cells_by_protocol;
  std::map<std::string, std::int64_t> cells_by_method;
  double token_cells = 0;        // sum over units of nominal length x cells of the unit
  double prefill_tokens = 0;     // sum over units of nominal length (one prefill per unit)
  double max_decode_tokens = 0;  // sum over cells of the task's generation budget
  std::vector<CertificationSize> certifications;
  std::vector<FamilySize> families;
};

PlanSummary summarize(const Manifest& m, const Expansion& ex);
void print_plan(std::ostream& os, const Manifest& m, const Expansion& ex, const PlanSummary& s);
nlohmann::json summary_json(const Expansion& ex, const PlanSummary& s);

}  // namespace kvaudit::manifest

// Identity fields of a cell's record (see cell_identity.h).
#include "suite/run/cell_identity.h"

#include <string>

#include "suite/manifest/canonical.h"

namespace kvaudit::run {

records::CellRecord cell_identity_record(const manifest::Manifest& manifest,
                                         const manifest::Unit& unit, const manifest::Cell& cell) {
  const manifest::Benchmark& benchmark = manifest.benchmarks.at(unit.benchmark);
  const bool full = cell.method < 0;
  records::CellRecord r;
  r.cell_id = cell.id;
  r.unit_id = unit.id;
  r.model = manifest.models.at(unit.model).name;
  r.benchmark = benchmark.name;
  r.task = benchmark.tasks.at(unit.task);
  r.method = manifest::cell_method_name(manifest, cell);
  if (full) {
    r.method_id = "full";
    r.params_digest = manifest::params_digest(manifest::canonical_full_method());
  } else {
    const auto& config = manifest.methods.at(static_cast<std::size_t>(cell.method));
    r.method_id = config.method;
    r.params_digest = manifest::params_digest(manifest::canonical_method(manifest, config));
  }
  r.attention_backend = unit.attention_backend;
  r.protocol = cell.protocol;
  r.split = static_cast<records::Split>(unit.split);
  r.budget_kind = static_cast<records::BudgetKind>(cell.budget_kind);
  switch (cell.budget_kind) {
    case manifest::BudgetKind::compression:
      r.compression = cell.budget;
      r.retention = 1 - cell.budget;
      break;
    case manifest::BudgetKind::retention:
      r.retention = cell.budget;
      r.compression = 1 - cell.budget;
      break;
    case manifest::BudgetKind::threshold:
      r.threshold = cell.budget;
      break;
    case manifest::BudgetKind::none:
      break;
  }
  r.instance = static_cast<std::uint32_t>(unit.instance);
  r.nominal_length = static_cast<std::uint32_t>(benchmark.length);
  return r;
}

}  // namespace kvaudit::run

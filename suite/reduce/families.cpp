// Resolving the Bonferroni family of an analysis table (see families.h).
#include "suite/reduce/families.h"

#include <algorithm>
#include <climits>

#include "base/errors.h"
#include "suite/reduce/table.h"

namespace kvaudit::reduce {
namespace {

std::string join_with(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

stats::Family ResolvedFamily::family() const {
  if (m > INT_MAX)
    throw InputError("family " + name + ": m = " + std::to_string(m) + " is too large");
  return stats::Family{name, static_cast<int>(std::max<std::int64_t>(m, 1))};
}

std::string ResolvedFamily::describe() const {
  return "family " + name + " (" + (declared ? "declared" : "per table") +
         "), m = " + std::to_string(m) + ", alpha = " + format_exact(alpha);
}

ResolvedFamily resolve_family(const std::vector<LockedFamily>& families, double alpha,
                              const std::string& analysis, const std::string& table_id,
                              const std::vector<std::string>& row_dims,
                              std::int64_t expected_rows) {
  std::vector<const LockedFamily*> declared;
  for (const auto& f : families)
    if (f.analysis == analysis) declared.push_back(&f);
  ResolvedFamily r;
  r.analysis = analysis;
  if (!declared.empty()) {
    std::sort(declared.begin(), declared.end(),
              [](const LockedFamily* a, const LockedFamily* b) { return a->name < b->name; });
    const LockedFamily& f = *declared.front();
    r.name = f.name;
    r.over = f.over;
    r.m = std::max<std::int64_t>(f.m, 1);
    r.alpha = f.alpha;
    r.declared = true;
    r.note = "declared in the manifest over " + join_with(f.over, " x ") + "; m from the lock";
    std::vector<std::string> outside;
    for (const auto& d : row_dims)
      if (std::find(f.over.begin(), f.over.end(), d) == f.over.end()) outside.push_back(d);
    if (!outside.empty()) r.note += "; one family instance per " + join_with(outside, " x ");
    if (declared.size() > 1)
      r.note += "; " + std::to_string(declared.size() - 1) +
                " further family declared for this analysis is not used by this table";
    return r;
  }
  r.name = table_id;
  r.over = row_dims;
  r.m = std::max<std::int64_t>(expected_rows, 1);
  r.alpha = alpha;
  r.declared = false;
  r.note = "not declared in the manifest: the family is this table's " +
           std::to_string(expected_rows) + " rows (" + join_with(row_dims, " x ") + ")";
  return r;
}

void add_family_attributes(Table& table, const ResolvedFamily& family) {
  table.add_attribute("family", family.name);
  table.add_attribute("family_declared", family.declared ? "true" : "false");
  table.add_attribute("family_over", join_with(family.over, ","));
  table.add_attribute("m", std::to_string(family.m));
  table.add_attribute("alpha", format_exact(family.alpha));
  table.add_attribute("per_comparison_alpha", format_exact(family.per_comparison_alpha()));
  table.add_attribute("family_note", family.note);
}

}  // namespace kvaudit::reduce

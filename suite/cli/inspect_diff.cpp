// kvaudit inspect --diff (see inspect_diff.h).
#include "suite/cli/inspect_diff.h"

#include <bit>
#include <cstdint>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "suite/common/sha256.h"
#include "suite/records/shard_reader.h"

namespace kvaudit::cli {
namespace {

using records::CellRecord;

// What a cell is, independent of its id (see inspect_diff.h).
using CellKey =
    std::tuple<std::string, std::string, std::string, std::uint32_t, std::int8_t, std::string,
               std::int8_t, std::uint64_t, std::uint64_t, std::uint64_t, std::int8_t>;

CellKey key_of(const CellRecord& r) {
  return {r.model,
          r.benchmark,
          r.task,
          r.instance,
          records::enum_stored_value(r.attention_backend),
          r.method,
          records::enum_stored_value(r.budget_kind),
          std::bit_cast<std::uint64_t>(r.compression),
          std::bit_cast<std::uint64_t>(r.retention),
          std::bit_cast<std::uint64_t>(r.threshold),
          records::enum_stored_value(r.protocol)};
}

records::StudyRecords read(const std::filesystem::path& study) {
  const auto shards = std::filesystem::is_directory(study / "shards") ? study / "shards" : study;
  return records::read_study(shards);
}

struct Tally {
  std::int64_t identical = 0, different = 0, unknown = 0;
  void add(std::uint64_t a, std::uint64_t b) {
    if (a == 0 || b == 0) {
      ++unknown;
    } else if (a == b) {
      ++identical;
    } else {
      ++different;
    }
  }
};

std::string budget_text(const CellRecord& r) {
  std::ostringstream s;
  switch (r.budget_kind) {
    case records::BudgetKind::compression:
      s << "cr " << r.compression;
      break;
    case records::BudgetKind::retention:
      s << "retention " << r.retention;
      break;
    case records::BudgetKind::threshold:
      s << "threshold " << r.threshold;
      break;
    case records::BudgetKind::none:
      s << "full";
      break;
  }
  return s.str();
}

std::string percent(std::int64_t part, std::int64_t whole) {
  if (whole == 0) return "-";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1)
    << 100.0 * static_cast<double>(part) / static_cast<double>(whole) << "%";
  return s.str();
}

}  // namespace

int inspect_diff(const std::filesystem::path& study_a, const std::filesystem::path& study_b,
                 std::ostream& out) {
  const records::StudyRecords a = read(study_a);
  const records::StudyRecords b = read(study_b);
  std::map<CellKey, const CellRecord*> in_b;
  for (const CellRecord& r : b.records) in_b.emplace(key_of(r), &r);

  std::int64_t matched = 0, only_a = 0, other_id = 0, not_ok = 0, compared = 0;
  Tally prompts, kept;
  std::int64_t outputs_identical = 0, outputs_different = 0;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> per_method;  // differing, compared
  std::vector<std::string> first;
  for (const CellRecord& ra : a.records) {
    const auto it = in_b.find(key_of(ra));
    if (it == in_b.end()) {
      ++only_a;
      continue;
    }
    const CellRecord& rb = *it->second;
    ++matched;
    if (ra.cell_id != rb.cell_id) ++other_id;
    if (ra.status != records::CellStatus::ok || rb.status != records::CellStatus::ok) {
      ++not_ok;
      continue;
    }
    ++compared;
    prompts.add(ra.prompt_digest, rb.prompt_digest);
    kept.add(ra.kept_digest, rb.kept_digest);
    const bool same_output = ra.output == rb.output;
    (same_output ? outputs_identical : outputs_different) += 1;
    std::vector<std::string> what;
    if (ra.prompt_digest != 0 && rb.prompt_digest != 0 && ra.prompt_digest != rb.prompt_digest) {
      what.emplace_back("prompt");
    }
    if (ra.kept_digest != 0 && rb.kept_digest != 0 && ra.kept_digest != rb.kept_digest) {
      what.emplace_back("kept set");
    }
    if (!same_output) what.emplace_back("output");
    auto& m = per_method[ra.method];
    ++m.second;
    if (what.empty()) continue;
    ++m.first;
    if (first.size() < 10) {
      std::string line =
          "  " + id_hex(ra.cell_id) + (ra.cell_id != rb.cell_id ? "/" + id_hex(rb.cell_id) : "") +
          "  " + ra.method + " " + budget_text(ra) + " " + std::string(protocol_name(ra.protocol)) +
          " " + std::string(attention_backend_name(ra.attention_backend)) + " " + ra.task + " #" +
          std::to_string(ra.instance) + ":";
      for (const auto& w : what) line += " " + w;
      first.push_back(line);
    }
  }
  const std::int64_t only_b = static_cast<std::int64_t>(b.records.size()) - matched;

  out << "A  " << study_a.string() << "  (" << a.records.size() << " records)\n"
      << "B  " << study_b.string() << "  (" << b.records.size() << " records)\n"
      << "cells matched by (model, benchmark, task, instance, backend, method, budget, protocol): "
      << matched << "; only in A: " << only_a << "; only in B: " << only_b << "\n";
  if (other_id > 0) {
    out << "  " << other_id
        << " matched cells have different cell ids (their content differs: method parameters, "
           "model or data)\n";
  }
  if (not_ok > 0) out << "  " << not_ok << " matched cells not compared (not ok in A or B)\n";
  out << "compared (ok in both): " << compared << "\n"
      << "              identical      different  unknown (no digest)\n";
  const auto row = [&](const char* name, std::int64_t same, std::int64_t diff,
                       std::int64_t unknown) {
    out << "  " << std::left << std::setw(11) << name << std::right << std::setw(7) << same << " "
        << std::setw(6) << percent(same, compared) << std::setw(8) << diff << " " << std::setw(6)
        << percent(diff, compared) << std::setw(10) << unknown << "\n";
  };
  row("prompts", prompts.identical, prompts.different, prompts.unknown);
  row("kept sets", kept.identical, kept.different, kept.unknown);
  row("outputs", outputs_identical, outputs_different, 0);
  bool any = false;
  for (const auto& [method, counts] : per_method) any = any || counts.first > 0;
  if (any) {
    out << "differing cells per method (of those compared):\n";
    for (const auto& [method, counts] : per_method) {
      out << "  " << std::left << std::setw(24) << method << std::right << std::setw(7)
          << counts.first << " of " << counts.second << "\n";
    }
    out << "first cells where the studies part (A id[/B id], what differs):\n";
    for (const auto& line : first) out << line << "\n";
  } else {
    out << "no compared cell differs\n";
  }
  return 0;
}

}  // namespace kvaudit::cli

// kvaudit inspect --selections (see inspect_selections.h).
#include "suite/cli/inspect_selections.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/records/content_digests.h"
#include "suite/reduce/study_loader.h"
#include "suite/run/unit_executor.h"

namespace kvaudit::cli {
namespace {

using nlohmann::json;

const records::CellRecord* find_record(const records::StudyRecords& study, std::uint64_t id) {
  for (const records::CellRecord& r : study.records) {
    if (r.cell_id == id) return &r;
  }
  return nullptr;
}

std::string digest_text(std::uint64_t digest) { return digest == 0 ? "none" : id_hex(digest); }

}  // namespace

std::uint64_t parse_cell_id(const std::string& text, const std::string& what) {
  std::string digits = text;
  if (digits.starts_with("0x") || digits.starts_with("0X")) digits = digits.substr(2);
  const bool hex =
      digits.size() == 16 && std::all_of(digits.begin(), digits.end(),
                                         [](unsigned char c) { return std::isxdigit(c) != 0; });
  const bool decimal = !digits.empty() && digits.size() <= 20 && digits == text &&
                       std::all_of(digits.begin(), digits.end(),
                                   [](unsigned char c) { return std::isdigit(c) != 0; });
  try {
    if (hex) return std::stoull(digits, nullptr, 16);
    if (decimal) return std::stoull(digits, nullptr, 10);
  } catch (const std::exception&) {
  }
  throw InputError(what + ": '" + text +
                   "' is not a cell id (16 hex digits as the report's tables print them, or a "
                   "decimal number)");
}

int inspect_selections(const InspectSelectionsOptions& options) {
  const std::uint64_t id = parse_cell_id(options.cell, "--cell");
  reduce::LoadOptions load;
  load.results_dir = options.study;
  load.manifest_file = options.manifest;
  const reduce::LoadedStudy study = reduce::load_study(load);

  const auto& cells = study.expansion.cells;
  const auto cell =
      std::lower_bound(cells.begin(), cells.end(), id,
                       [](const manifest::Cell& c, std::uint64_t v) { return c.id < v; });
  if (cell == cells.end() || cell->id != id) {
    throw InputError("--cell " + id_hex(id) + ": no such cell in the study " +
                     study.results_dir.string() + " (its manifest expands to " +
                     std::to_string(cells.size()) + " cells)");
  }
  const records::CellRecord* record = find_record(study.records, id);
  if (record == nullptr) {
    throw InputError("--cell " + id_hex(id) + ": the study " + study.results_dir.string() +
                     " has no record of this cell yet (run it first)");
  }
  const manifest::Unit& unit = study.expansion.units[cell->unit];

  run::UnitExecutorOptions executor_options;  // the CPU backend, as on a machine without a GPU
  run::UnitExecutor executor(study.manifest, study.expansion, executor_options);
  run::UnitTrace trace;
  const manifest::Cell* one[] = {&*cell};
  const std::vector<records::CellRecord> again = executor.execute(unit, one, &trace);
  const records::CellRecord& now = again.at(0);
  if (now.status != records::CellStatus::ok) {
    std::cerr << "inspect: cell " << id_hex(id)
              << " did not run again: " << records::enum_name(now.status) << ": " << now.error
              << "\n";
    return 1;
  }

  std::ofstream file;
  if (options.out) {
    file.open(*options.out, std::ios::out | std::ios::trunc);
    if (!file) throw InputError(options.out->string() + ": cannot be written (--out)");
  }
  std::ostream& out = options.out ? static_cast<std::ostream&>(file) : std::cout;
  const int boundary = trace.boundaries.at(0);
  json head = {
      {"cell_id", id_hex(id)},
      {"unit_id", id_hex(unit.id)},
      {"model", record->model},
      {"benchmark", record->benchmark},
      {"task", record->task},
      {"instance", record->instance},
      {"method", record->method},
      {"budget_kind", manifest::budget_kind_name(cell->budget_kind)},
      {"budget", cell->budget},
      {"protocol", protocol_name(cell->protocol)},
      {"attention_backend", attention_backend_name(unit.attention_backend)},
      {"device", "cpu"},
      {"boundary", boundary},
      {"layers", trace.layers},
      {"kv_heads", trace.kv_heads},
      {"prompt_ids",
       {{"context", trace.tokens.context},
        {"question", trace.tokens.question},
        {"suffix", trace.tokens.suffix}}},
      {"prompt_digest", digest_text(now.prompt_digest)},
      {"kept_digest", digest_text(now.kept_digest)},
      {"output", now.output},
      {"recorded",
       {{"prompt_digest", digest_text(record->prompt_digest)},
        {"kept_digest", digest_text(record->kept_digest)},
        {"output", record->output}}},
  };
  out << head.dump() << "\n";
  const std::optional<methods::Selection>& selection = trace.selections.at(0);
  for (int l = 0; l < trace.layers; ++l) {
    for (int h = 0; h < trace.kv_heads; ++h) {
      json line = {{"layer", l}, {"kv_head", h}};
      if (selection) {
        line["kept"] =
            selection->kept.at(static_cast<std::size_t>(l)).at(static_cast<std::size_t>(h));
      } else {
        std::vector<int> all(static_cast<std::size_t>(boundary));
        for (int p = 0; p < boundary; ++p) all[static_cast<std::size_t>(p)] = p;
        line["kept"] = all;
      }
      out << line.dump() << "\n";
    }
  }
  out.flush();
  if (!out)
    throw InputError((options.out ? options.out->string() : "standard output") + ": write failed");

  // The comparison with the record.
  std::vector<std::string> differing;
  const bool has_digests = record->prompt_digest != 0 || record->kept_digest != 0;
  if (has_digests && record->prompt_digest != now.prompt_digest)
    differing.emplace_back("prompt_digest");
  if (has_digests && record->kept_digest != now.kept_digest) differing.emplace_back("kept_digest");
  if (record->output != now.output) differing.emplace_back("output");
  std::cerr << "cell " << id_hex(id) << " (" << record->method << ", "
            << manifest::budget_kind_name(cell->budget_kind) << " " << cell->budget << ", "
            << protocol_name(cell->protocol) << ", "
            << attention_backend_name(unit.attention_backend) << ", " << record->task
            << " instance " << record->instance << "): re-derived on the CPU\n"
            << "  prompt_digest  recorded " << digest_text(record->prompt_digest) << "  now "
            << digest_text(now.prompt_digest) << "\n"
            << "  kept_digest    recorded " << digest_text(record->kept_digest) << "  now "
            << digest_text(now.kept_digest) << "\n"
            << "  output         " << (record->output == now.output ? "identical" : "differs")
            << "\n";
  if (!has_digests) {
    std::cerr << "  the record has no digests (written before records schema version 4)\n";
  }
  if (!differing.empty()) {
    std::cerr << "inspect: the re-derived cell differs from its record in:";
    for (const auto& f : differing) std::cerr << " " << f;
    std::cerr << " (a record made on another device or by another kvaudit version can differ "
                 "for that reason)\n";
    return 1;
  }
  std::cerr << "  matches the record\n";
  return 0;
}

}  // namespace kvaudit::cli

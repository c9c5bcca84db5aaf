// Test tool: runs read_study (or describe_study) on a directory and prints the result as JSON, for
// the Python drivers of the records tests.
//
//   read_study_tool --dir D [--salvage] [--expected-sha256 H] [--describe]
//
// Output: {"n_records", "n_from_published", "manifest_sha256", "cell_ids": [...],
// "published": [{"file", "n_records", "n_duplicates"}], "temporary": [{"file", "outcome",
// "n_flushed", "n_added", "n_already_present", "message"}], "duplicates": [{"cell_id",
// "first_file", "duplicate_file"}], "warnings": [...]}; on an InputError {"error": "..."} and exit
// status 1. --describe prints describe_study's text instead.
#include <exception>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/errors.h"
#include "suite/records/shard_reader.h"
#include "suite/records/study_summary.h"

int main(int argc, char** argv) {
  std::string dir;
  bool describe = false;
  kvaudit::records::StudyReadOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (flag == "--salvage") {
      options.salvage = true;
    } else if (flag == "--expected-sha256" && i + 1 < argc) {
      options.expected_manifest_sha256 = argv[++i];
    } else if (flag == "--describe") {
      describe = true;
    } else {
      std::cerr << "read_study_tool: bad argument " << flag << "\n";
      return 2;
    }
  }
  try {
    if (describe) {
      kvaudit::records::describe_study(dir, std::cout);
      return 0;
    }
    const auto study = kvaudit::records::read_study(dir, options);
    nlohmann::json out;
    out["n_records"] = study.records.size();
    out["n_from_published"] = study.n_from_published;
    out["manifest_sha256"] = study.manifest_sha256;
    out["cell_ids"] = nlohmann::json::array();
    for (const auto& record : study.records) out["cell_ids"].push_back(record.cell_id);
    out["published"] = nlohmann::json::array();
    for (const auto& shard : study.published) {
      out["published"].push_back({{"file", shard.file.string()},
                                  {"n_records", shard.n_records},
                                  {"n_duplicates", shard.n_duplicates}});
    }
    out["temporary"] = nlohmann::json::array();
    for (const auto& shard : study.temporary) {
      out["temporary"].push_back(
          {{"file", shard.file.string()},
           {"outcome", std::string(kvaudit::records::to_string(shard.outcome))},
           {"n_flushed", shard.n_flushed},
           {"n_added", shard.n_added},
           {"n_already_present", shard.n_already_present},
           {"message", shard.message}});
    }
    out["duplicates"] = nlohmann::json::array();
    for (const auto& d : study.duplicates) {
      out["duplicates"].push_back({{"cell_id", d.cell_id},
                                   {"first_file", d.first_file.string()},
                                   {"duplicate_file", d.duplicate_file.string()}});
    }
    out["warnings"] = study.warnings;
    std::cout << out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  } catch (const kvaudit::InputError& e) {
    std::cout << nlohmann::json{{"error", e.what()}}.dump() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "read_study_tool: " << e.what() << "\n";
    return 2;
  }
}

// Where a report goes, without ever replacing an earlier one: everything is written into a fresh
// temporary directory <results>/.report-tmp.XXXXXX beside the final place, then published by
// renaming it to <results>/report, or, when that exists, to the first free report-2, report-3, …
// (renameat2 with RENAME_NOREPLACE, so a concurrent reduce cannot be overwritten either).
// A reduce that fails leaves no report behind (the temporary directory is removed).
#pragma once

#include <filesystem>

namespace kvaudit::reduce {

class ReportDirectory {
 public:
  // Creates the temporary directory under `results_dir`; InternalError on failure.
  explicit ReportDirectory(const std::filesystem::path& results_dir);
  ~ReportDirectory();  // removes the temporary directory unless published
  ReportDirectory(const ReportDirectory&) = delete;
  ReportDirectory& operator=(const ReportDirectory&) = delete;

  const std::filesystem::path& temp_path() const { return temp_; }
  // Renames the temporary directory to the first free name of report, report-2, …; returns it.
  std::filesystem::path publish();

 private:
  std::filesystem::path results_;
  std::filesystem::path temp_;
  bool published_ = false;
};

}  // namespace kvaudit::reduce

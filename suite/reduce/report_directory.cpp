// Publishing a report directory without replacing an earlier one (see report_directory.h).
#include "suite/reduce/report_directory.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include "base/errors.h"
#include "suite/common/atomic_file.h"

namespace kvaudit::reduce {

ReportDirectory::ReportDirectory(const std::filesystem::path& results_dir) : results_(results_dir) {
  std::string pattern = (results_ / ".report-tmp.XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw InternalError("cannot create a temporary report directory in " + results_.string() +
                        ": " + std::strerror(errno));
  temp_ = pattern;
}

ReportDirectory::~ReportDirectory() {
  if (published_) return;
  std::error_code ec;
  std::filesystem::remove_all(temp_, ec);
}

std::filesystem::path ReportDirectory::publish() {
  for (int i = 1; i < 10000; ++i) {
    const auto target = results_ / (i == 1 ? std::string("report") : "report-" + std::to_string(i));
    if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE) == 0) {
      published_ = true;
      fsync_path(results_);
      return target;
    }
    if (errno != EEXIST && errno != ENOTEMPTY)
      throw InternalError("cannot publish the report " + temp_.string() + " as " + target.string() +
                          ": " + std::strerror(errno));
  }
  throw InternalError("cannot publish the report: report … report-9999 all exist in " +
                      results_.string());
}

}  // namespace kvaudit::reduce

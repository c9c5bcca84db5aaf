// Distinct failure causes of a run and how many cells each hit, so the run summary can print the
// first cause of each (instead of only "error 12"). A cause is the record's status (oom, error)
// and its error text; up to kMaxCauses distinct causes are kept per rank (the rest are counted).
// Ranks serialise their tallies (to_text / merge_text) for MPI_Gatherv to rank 0.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "suite/records/cell_record.h"

namespace kvaudit::run {

class FailureTally {
 public:
  static constexpr std::size_t kMaxCauses = 64;

  // Counts `record` when its status is oom or error.
  void add(const records::CellRecord& record);
  // Lines "<count>\t<status>\t<message>" (tabs and newlines in messages become spaces).
  std::string to_text() const;
  // Adds the tally serialised by to_text(); malformed lines are ignored.
  void merge_text(const std::string& text);

  bool empty() const { return causes_.empty() && n_other_ == 0; }
  std::size_t n_failed() const;
  // At most `limit` lines "  <status> ×<count>: <message>", most frequent first, plus a line for
  // causes beyond the limit.
  std::string describe(std::size_t limit = 10) const;

 private:
  void add_cause(const std::string& status, const std::string& message, std::size_t count);

  std::map<std::pair<std::string, std::string>, std::size_t> causes_;  // (status, message) → n
  std::size_t n_other_ = 0;  // failures whose cause did not fit into kMaxCauses
};

}  // namespace kvaudit::run

// Distinct failure causes and their counts (see failure_tally.h).
#include "suite/run/failure_tally.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "suite/records/record_comparison.h"

namespace kvaudit::run {
namespace {

std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  constexpr std::size_t kMaxMessage = 400;
  if (text.size() > kMaxMessage) text = text.substr(0, kMaxMessage) + " …";
  return text;
}

}  // namespace

void FailureTally::add_cause(const std::string& status, const std::string& message,
                             std::size_t count) {
  const auto key = std::make_pair(status, message);
  if (const auto it = causes_.find(key); it != causes_.end()) {
    it->second += count;
  } else if (causes_.size() < kMaxCauses) {
    causes_.emplace(key, count);
  } else {
    n_other_ += count;
  }
}

void FailureTally::add(const records::CellRecord& record) {
  if (!records::is_retryable_status(record.status)) return;
  add_cause(std::string(records::enum_name(record.status)), one_line(record.error), 1);
}

std::string FailureTally::to_text() const {
  std::string out;
  for (const auto& [key, count] : causes_) {
    out += std::to_string(count) + "\t" + key.first + "\t" + key.second + "\n";
  }
  if (n_other_ > 0) out += std::to_string(n_other_) + "\t\t\n";
  return out;
}

void FailureTally::merge_text(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto tab1 = line.find('\t');
    const auto tab2 = tab1 == std::string::npos ? tab1 : line.find('\t', tab1 + 1);
    if (tab2 == std::string::npos) continue;
    std::size_t count = 0;
    try {
      count = std::stoull(line.substr(0, tab1));
    } catch (...) {
      continue;
    }
    const std::string status = line.substr(tab1 + 1, tab2 - tab1 - 1);
    if (status.empty()) {
      n_other_ += count;
    } else {
      add_cause(status, line.substr(tab2 + 1), count);
    }
  }
}

std::size_t FailureTally::n_failed() const {
  std::size_t n = n_other_;
  for (const auto& entry : causes_) n += entry.second;
  return n;
}

std::string FailureTally::describe(std::size_t limit) const {
  std::vector<std::pair<std::size_t, std::pair<std::string, std::string>>> sorted;
  for (const auto& [key, count] : causes_) sorted.push_back({count, key});
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::ostringstream out;
  std::size_t rest = n_other_, rest_causes = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i >= limit) {
      rest += sorted[i].first;
      ++rest_causes;
      continue;
    }
    out << "  " << sorted[i].second.first << " ×" << sorted[i].first << ": "
        << (sorted[i].second.second.empty() ? "(no message)" : sorted[i].second.second) << "\n";
  }
  if (rest > 0) {
    out << "  … " << rest << " more failed cell(s)"
        << (rest_causes > 0 ? " with " + std::to_string(rest_causes) + " other cause(s)" : "")
        << " (kvaudit inspect lists every record)\n";
  }
  return out.str();
}

}  // namespace kvaudit::run

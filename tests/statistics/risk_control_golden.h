// Loads tests/golden/statistics/risk_control_golden.json (written by
// tools/golden/make_risk_control_golden.py: MAPIE, confseq, scipy and mpmath references for the
// bounded-loss p-values and bounds, the multiple-testing procedures and power / sample size).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kvaudit::stats::testing {

inline const nlohmann::json& risk_control_golden() {
  static const nlohmann::json golden = [] {
    std::ifstream in(KVAUDIT_RISK_CONTROL_GOLDEN);
    if (!in) throw std::runtime_error("cannot open " + std::string(KVAUDIT_RISK_CONTROL_GOLDEN));
    return nlohmann::json::parse(in);
  }();
  return golden;
}

}  // namespace kvaudit::stats::testing

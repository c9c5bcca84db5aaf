// Writes a synthetic study with planted effects (tests/reduce/synthetic_study.h) for the reduce
// tests and the acceptance timing.
//
//   make_synthetic_study --dir DIR [--preset small|acceptance] [--seed S] [--resamples B]
//                        [--ranks R] [--drop-method M --drop-model X] [--exclude MODEL/TASK/I]...
//                        [--oom-method M --oom-fraction F] [--truth FILE]
//
// small: 2 models x 2 backends x 6 tasks x 40 instances, 5 methods x 3 compression ratios x 2
// protocols (30,720 records). acceptance: 3 models, 13 + 8 tasks, 9 methods x 4 ratios x 2
// protocols on sdpa plus a query-aware sdpa/eager confound grid (185,112 records), B = 50,000.
// --truth writes the planted values as JSON (p_full per model and backend, λ slope and gap per
// method, the contract) so that a test can check the report against them.
// Prints the results directory (run `kvaudit reduce` on it) and the record count.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/reduce/synthetic_study.h"

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "make_synthetic_study: " << problem
            << "\nusage: make_synthetic_study --dir DIR [--preset small|acceptance] [--seed S] "
               "[--resamples B] [--ranks R] [--drop-method M --drop-model X] "
               "[--exclude MODEL/TASK/I]... [--oom-method M --oom-fraction F] [--truth FILE]\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  using kvaudit::reduce::testing::SyntheticConfig;
  std::string dir, preset = "small", truth;
  SyntheticConfig cfg;
  std::vector<std::pair<std::string, std::string>> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    overrides.emplace_back(flag, argv[++i]);
    if (flag == "--dir") dir = overrides.back().second;
    if (flag == "--preset") preset = overrides.back().second;
  }
  if (dir.empty()) usage("--dir is required");
  if (preset == "acceptance")
    cfg = kvaudit::reduce::testing::acceptance_config();
  else if (preset != "small")
    usage("unknown preset " + preset);
  try {
    for (const auto& [flag, value] : overrides) {
      if (flag == "--dir" || flag == "--preset") continue;
      if (flag == "--seed")
        cfg.seed = std::stoull(value);
      else if (flag == "--resamples")
        cfg.bootstrap_resamples = std::stoll(value);
      else if (flag == "--ranks")
        cfg.ranks = std::stoi(value);
      else if (flag == "--drop-method")
        cfg.drop_method = value;
      else if (flag == "--drop-model")
        cfg.drop_model = value;
      else if (flag == "--exclude")
        cfg.excluded_units.insert(value);
      else if (flag == "--oom-method")
        cfg.oom_method = value;
      else if (flag == "--oom-fraction")
        cfg.oom_fraction = std::stod(value);
      else if (flag == "--truth")
        truth = value;
      else
        usage("unknown option " + flag);
    }
    const auto study = kvaudit::reduce::testing::write_synthetic_study(dir, cfg);
    if (!truth.empty()) {
      nlohmann::json j;
      j["backend_shift"] = cfg.backend_shift;
      for (std::size_t m = 0; m < cfg.models.size(); ++m)
        for (const char* b : {"sdpa", "eager"})
          j["p_full"][cfg.models[m]][b] = kvaudit::reduce::testing::p_full(cfg, m, b);
      for (const auto& pm : kvaudit::reduce::testing::methods_of(cfg))
        j["methods"][pm.name] = {{"slope", pm.slope}, {"gap", pm.gap}};
      j["compression"] = cfg.compression;
      j["contract"] = {{"tau", cfg.tau}, {"epsilon", cfg.epsilon}, {"delta", cfg.delta}};
      j["records"] = study.records_written;
      j["cells"] = study.cells_expected;
      std::ofstream out(truth);
      out << j.dump(2) << "\n";
      if (!out) throw std::runtime_error("cannot write " + truth);
    }
    std::cout << study.results_dir.string() << "\n"
              << study.records_written << " records of " << study.cells_expected << " cells\n";
  } catch (const std::exception& e) {
    std::cerr << "make_synthetic_study: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

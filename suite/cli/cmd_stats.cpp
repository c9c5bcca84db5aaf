// kvaudit stats: a calculator for checking published certification and interval claims with the
// same code paths that reduce uses (statistics/). Subcommands:
//   kmax      --n N --epsilon E --delta D                 K*, K*/n, p(K*), p(K*+1)
//   certify   --n N --epsilon E --delta D --violations K1,K2,...   fixed-sequence decision
//   cp        --x X --n N [--alpha A] [--m M]             two-sided Clopper–Pearson at A/M
//   cp        --x X --n N --match LOW,HIGH [--max-m M]    the M whose interval prints as LOW,HIGH
//   bootstrap --a FILE --b FILE [--resamples B] [--seed S] paired bootstrap of mean(a − b)
//   hb        --mean R --n N --alpha A                    Hoeffding–Bentkus p of H0: E[loss] > A
//   wsr       --losses FILE | --losses-list L1,L2,... --delta D [--alpha A]
//                                                       WSR upper bound (and p of E[loss] ≥ A)
//   power     --n N --epsilon E --delta D --rate R        K*, P{Bin(n, R) ≤ K*}
//   sample-size --epsilon E --delta D --rate R --power P [--n-max N]   smallest n with power ≥ P
// (hb, wsr, power, sample-size: statistics/bounded_loss.h, certification_power.h; issue 17.)
// Every subcommand prints a small table, or one JSON object with --json. kmax and certify take
// O(1) memory and O(log n) binomial tails for any n ≤ 2^53 (statistics/binomial.h); a larger n,
// a seed that is negative or not a number, and a --match with LOW > HIGH or outside [0, 1] are
// bad input (exit 1) naming the option.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/errors.h"
#include "statistics/binomial.h"
#include "statistics/bounded_loss.h"
#include "statistics/certification.h"
#include "statistics/certification_power.h"
#include "statistics/clopper_pearson.h"
#include "statistics/paired_bootstrap.h"
#include "suite/cli/command.h"
#include "suite/cli/seed_option.h"

namespace kvaudit::cli {

namespace {

template <typename T>
T required_stats_option(const po::variables_map& vm, const char* name, const std::string& sub) {
  if (!vm.count(name)) {
    throw InputError("stats " + sub + ": --" + std::string(name) + " is required");
  }
  return vm[name].as<T>();
}

std::int64_t positive_n(const po::variables_map& vm, const std::string& sub) {
  const auto n = required_stats_option<std::int64_t>(vm, "n", sub);
  if (n <= 0)
    throw InputError("stats " + sub + ": --n must be ≥ 1 (got " + std::to_string(n) + ")");
  if (n > stats::kMaxTrials) {
    throw InputError(
        "stats " + sub + ": --n must be ≤ 2^53 = " + std::to_string(stats::kMaxTrials) +
        " (binomial tails are computed in double precision; got " + std::to_string(n) + ")");
  }
  return n;
}

double open_unit(const po::variables_map& vm, const char* name, const std::string& sub) {
  const double v = required_stats_option<double>(vm, name, sub);
  if (!(v > 0 && v < 1)) {
    std::ostringstream msg;
    msg << "stats " << sub << ": --" << name << " must lie in (0, 1) (got " << v << ")";
    throw InputError(msg.str());
  }
  return v;
}

std::string fixed(double v, int decimals) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << v;
  return out.str();
}

std::string general(double v) {
  std::ostringstream out;
  out << std::setprecision(6) << v;
  return out.str();
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) parts.push_back(part);
  return parts;
}

int kmax(const po::variables_map& vm, bool as_json) {
  const auto n = positive_n(vm, "kmax");
  const double eps = open_unit(vm, "epsilon", "kmax");
  const double delta = open_unit(vm, "delta", "kmax");
  const auto k = stats::max_certifiable_violations(n, eps, delta);
  nlohmann::json j = {{"n", n},
                      {"epsilon", eps},
                      {"delta", delta},
                      {"violation_cap", stats::violation_cap(n, eps)}};
  if (k < 0) {
    j["k_star"] = nullptr;
    j["p_0"] = stats::ltt_p_value(n, eps, 0);
  } else {
    j["k_star"] = k;
    j["k_star_over_n"] = static_cast<double>(k) / static_cast<double>(n);
    j["p_k_star"] = stats::ltt_p_value(n, eps, k);
    j["p_k_star_plus_1"] = stats::ltt_p_value(n, eps, k + 1);
  }
  if (as_json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << "n = " << n << ", epsilon = " << general(eps) << ", delta = " << general(delta)
            << "   (p_j = P{Bin(n, epsilon) <= K_j} if K_j <= floor(n*epsilon) - 1, else 1)\n";
  if (k < 0) {
    std::cout << "K*        none: nothing is certifiable\np(0)      "
              << general(j["p_0"].get<double>()) << "  > delta\n";
  } else {
    std::cout << "K*        " << k << "\nK*/n      " << fixed(j["k_star_over_n"], 6)
              << "\np(K*)     " << general(j["p_k_star"].get<double>()) << "  <= delta"
              << "\np(K*+1)   " << general(j["p_k_star_plus_1"].get<double>()) << "  > delta\n";
  }
  return 0;
}

int certify(const po::variables_map& vm, bool as_json) {
  const auto n = positive_n(vm, "certify");
  const stats::Contract contract{0.0, open_unit(vm, "epsilon", "certify"),
                                 open_unit(vm, "delta", "certify")};
  std::vector<stats::CalibrationCount> counts;
  const auto list = required_stats_option<std::string>(vm, "violations", "certify");
  int j = 0;
  for (const auto& field : split_commas(list)) {
    ++j;
    std::size_t used = 0;
    long long k = -1;
    try {
      k = std::stoll(field, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != field.size() || field.empty() || k < 0 || k > n) {
      throw InputError("stats certify: --violations: entry " + std::to_string(j) + " ('" + field +
                       "') is not a count in [0, n = " + std::to_string(n) + "]");
    }
    // The procedure only sees K_j: certify_counts is certify() without the n-long indicators.
    counts.push_back({"candidate " + std::to_string(j), static_cast<std::int64_t>(k)});
  }
  if (counts.empty()) throw InputError("stats certify: --violations lists no counts");
  const auto r = stats::certify_counts("kvaudit stats certify", contract, n, counts);
  nlohmann::json out = {
      {"n", r.n},
      {"epsilon", r.contract.epsilon},
      {"delta", r.contract.delta},
      {"k_star", r.k_star < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.k_star)},
      {"selected", r.selected ? nlohmann::json(*r.selected + 1) : nlohmann::json("full-kv")},
      {"plug_in", r.plug_in ? nlohmann::json(*r.plug_in + 1) : nlohmann::json("full-kv")}};
  for (const auto& c : r.candidates) {
    out["candidates"].push_back({{"violations", c.violations},
                                 {"p_value", c.p_value},
                                 {"tested", c.tested},
                                 {"certified", c.certified}});
  }
  if (as_json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "n = " << r.n << ", epsilon = " << general(r.contract.epsilon)
            << ", delta = " << general(r.contract.delta)
            << ", K* = " << (r.k_star < 0 ? std::string("none") : std::to_string(r.k_star))
            << "   (fixed sequence, in the given order)\n";
  // K_j's column is as wide as the largest count (n may be up to 2^53).
  std::size_t k_width = 6;
  for (const auto& c : r.candidates) {
    k_width = std::max(k_width, std::to_string(c.violations).size() + 2);
  }
  std::cout << "  " << std::left << std::setw(8) << "j" << std::setw(static_cast<int>(k_width))
            << "K_j" << std::setw(14) << "p_j"
            << "certified\n"
            << std::right;
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    std::cout << "  " << std::left << std::setw(8) << (i + 1)
              << std::setw(static_cast<int>(k_width)) << c.violations << std::setw(14)
              << general(c.p_value)
              << (c.certified ? "yes" : (c.tested ? "no (sequence stops)" : "not tested"))
              << std::right << "\n";
  }
  std::cout << "decision: "
            << (r.selected ? "candidate " + std::to_string(*r.selected + 1)
                           : std::string("full-KV fallback (candidate 1 not certified)"))
            << "\nplug-in rule (no guarantee): "
            << (r.plug_in ? "candidate " + std::to_string(*r.plug_in + 1) : std::string("full-KV"))
            << "\n";
  return 0;
}

// The number of decimals a user wrote ("0.146" → 3).
int decimals_of(const std::string& text) {
  const auto dot = text.find('.');
  return dot == std::string::npos ? 0 : static_cast<int>(text.size() - dot - 1);
}

double parse_double(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v)) {
    throw InputError("stats cp: " + what + ": '" + text + "' is not a number");
  }
  return v;
}

int cp(const po::variables_map& vm, bool as_json) {
  const auto n = positive_n(vm, "cp");
  const auto x = required_stats_option<std::int64_t>(vm, "x", "cp");
  if (x < 0 || x > n) {
    throw InputError("stats cp: --x must lie in [0, n] (got x = " + std::to_string(x) +
                     ", n = " + std::to_string(n) + ")");
  }
  const double alpha = vm["alpha"].as<double>();
  if (!(alpha > 0 && alpha < 1)) throw InputError("stats cp: --alpha must lie in (0, 1)");
  if (vm.count("match")) {
    const auto parts = split_commas(vm["match"].as<std::string>());
    if (parts.size() != 2) throw InputError("stats cp: --match takes LOW,HIGH");
    const int dl = decimals_of(parts[0]);
    const int dh = decimals_of(parts[1]);
    const double low_value = parse_double(parts[0], "--match LOW");
    const double high_value = parse_double(parts[1], "--match HIGH");
    if (!(low_value >= 0 && low_value <= 1 && high_value >= 0 && high_value <= 1)) {
      throw InputError("stats cp: --match " + parts[0] + "," + parts[1] +
                       ": LOW and HIGH must lie in [0, 1]");
    }
    if (low_value > high_value) {
      throw InputError("stats cp: --match " + parts[0] + "," + parts[1] +
                       ": LOW must not exceed HIGH (an interval is written LOW,HIGH)");
    }
    const std::string low = fixed(low_value, dl);
    const std::string high = fixed(high_value, dh);
    const int max_m = vm["max-m"].as<int>();
    if (max_m < 1) throw InputError("stats cp: --max-m must be ≥ 1");
    std::vector<std::pair<int, int>> runs;  // [first, last] ranges of matching m
    for (int m = 1; m <= max_m; ++m) {
      const auto ci = stats::clopper_pearson_interval(x, n, alpha, {"match", m});
      if (fixed(ci.lower, dl) == low && fixed(ci.upper, dh) == high) {
        if (!runs.empty() && runs.back().second == m - 1) {
          runs.back().second = m;
        } else {
          runs.emplace_back(m, m);
        }
      }
    }
    nlohmann::json out = {{"x", x},     {"n", n},       {"alpha", alpha},
                          {"low", low}, {"high", high}, {"searched_m", {1, max_m}}};
    out["matching_m"] = nlohmann::json::array();
    for (const auto& [a, b] : runs) out["matching_m"].push_back({a, b});
    if (as_json) {
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    std::cout << x << "/" << n << " -> [" << low << ", " << high << "] at family-wise alpha "
              << general(alpha) << ", Bonferroni over m (searched m = 1.." << max_m << "):\n";
    if (runs.empty()) std::cout << "no M matches\n";
    for (const auto& [a, b] : runs) {
      const auto ci = stats::clopper_pearson_interval(x, n, alpha, {"match", a});
      std::cout << "  M = " << a;
      if (b != a) std::cout << ".." << b;
      std::cout << "   (at M = " << a << ": [" << fixed(ci.lower, 6) << ", " << fixed(ci.upper, 6)
                << "])\n";
    }
    return 0;
  }
  const int m = vm["m"].as<int>();
  if (m < 1) throw InputError("stats cp: --m must be ≥ 1");
  const auto ci = stats::clopper_pearson_interval(x, n, alpha, {"--m", m});
  if (as_json) {
    std::cout << nlohmann::json({{"x", x},
                                 {"n", n},
                                 {"alpha", alpha},
                                 {"m", m},
                                 {"per_interval_alpha", ci.per_interval_alpha},
                                 {"estimate", ci.estimate},
                                 {"lower", ci.lower},
                                 {"upper", ci.upper}})
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << x << "/" << n << " = " << fixed(ci.estimate, 4) << "   two-sided Clopper-Pearson at "
            << general(ci.per_interval_alpha) << " (alpha " << general(alpha) << " / m " << m
            << "): [" << fixed(ci.lower, 6) << ", " << fixed(ci.upper, 6) << "]\n";
  return 0;
}

// One column of numbers: one per line, or the first field of a CSV line; a first line that is not
// a number is taken as a header; blank lines are skipped.
std::vector<double> read_column(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError("stats bootstrap: " + path + ": cannot be read");
  std::vector<double> values;
  std::string line;
  std::size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto field = line.substr(0, line.find(','));
    const auto first = field.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    const auto trimmed = field.substr(first, field.find_last_not_of(" \t") - first + 1);
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(trimmed, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != trimmed.size() || used == 0 || !std::isfinite(v)) {
      if (values.empty() && line_number == 1) continue;  // a header
      throw InputError("stats bootstrap: " + path + ":" + std::to_string(line_number) + ": '" +
                       trimmed + "' is not a finite number");
    }
    values.push_back(v);
  }
  if (values.empty()) throw InputError("stats bootstrap: " + path + ": no numbers");
  return values;
}

int bootstrap(const po::variables_map& vm, bool as_json) {
  const auto a_path = required_stats_option<std::string>(vm, "a", "bootstrap");
  const auto b_path = required_stats_option<std::string>(vm, "b", "bootstrap");
  stats::BootstrapOptions options;
  options.resamples = vm["resamples"].as<std::int64_t>();
  options.seed = parse_seed_option(vm["seed"].as<std::string>(), "stats bootstrap: --seed");
  stats::PairedComparison comparison;
  comparison.name = "a - b";
  comparison.strata.push_back({0, read_column(a_path), read_column(b_path)});
  const auto& s = comparison.strata.front();
  if (s.arm_a.size() != s.arm_b.size()) {
    throw InputError("stats bootstrap: the columns differ in length (" + a_path + ": " +
                     std::to_string(s.arm_a.size()) + ", " + b_path + ": " +
                     std::to_string(s.arm_b.size()) + "); instances must be paired");
  }
  const auto r = stats::paired_bootstrap(comparison, options);
  if (as_json) {
    std::cout << nlohmann::json({{"instances", r.instances},
                                 {"mean_a", r.mean_a},
                                 {"mean_b", r.mean_b},
                                 {"delta", r.estimate},
                                 {"confidence", r.confidence},
                                 {"lower", r.lower},
                                 {"upper", r.upper},
                                 {"p_one_sided", r.p_value},
                                 {"resamples", r.resamples},
                                 {"seed", r.seed},
                                 {"replicate_hash", r.replicate_hash}})
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "n = " << r.instances << " paired instances, B = " << r.resamples
            << ", seed = " << r.seed << " (Philox4x32-10; percentile interval, type 7)\n"
            << "mean(a) = " << fixed(r.mean_a, 6) << ", mean(b) = " << fixed(r.mean_b, 6)
            << "\ndelta = mean(a - b) = " << fixed(r.estimate, 6) << "   95% [" << fixed(r.lower, 6)
            << ", " << fixed(r.upper, 6) << "]\n"
            << "one-sided p (H1: delta > 0) = (1 + #{delta* <= 0}) / (B + 1) = "
            << general(r.p_value) << "\n";
  return 0;
}

// --alpha given on the command line (its default 0.05 serves cp).
bool alpha_given(const po::variables_map& vm) {
  return vm.count("alpha") > 0 && !vm["alpha"].defaulted();
}

int hb(const po::variables_map& vm, bool as_json) {
  const double mean = required_stats_option<double>(vm, "mean", "hb");
  if (!(mean >= 0 && mean <= 1)) {
    std::ostringstream msg;
    msg << "stats hb: --mean (the mean loss r_hat) must lie in [0, 1] (got " << mean << ")";
    throw InputError(msg.str());
  }
  const auto n = positive_n(vm, "hb");
  if (!alpha_given(vm)) throw InputError("stats hb: --alpha is required");
  const double alpha = open_unit(vm, "alpha", "hb");
  const double p = stats::hoeffding_bentkus_p_value(mean, n, alpha);
  const double p_h = stats::hoeffding_p_value(mean, n, alpha);
  const double p_b = stats::bentkus_p_value(mean, n, alpha);
  if (as_json) {
    std::cout << nlohmann::json({{"mean", mean},
                                 {"n", n},
                                 {"alpha", alpha},
                                 {"p_value", p},
                                 {"hoeffding", p_h},
                                 {"bentkus", p_b}})
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "r_hat = " << general(mean) << ", n = " << n << ", alpha = " << general(alpha)
            << "   (H0: E[loss] > alpha, losses in [0, 1]; Learn then Test p^HB)\n"
            << "Hoeffding   exp(-n h1(min(r_hat, alpha), alpha)) = " << general(p_h)
            << "\nBentkus     e P{Bin(n, alpha) <= ceil(n r_hat)}   = " << general(p_b)
            << "\np-value     " << general(p) << "\n";
  return 0;
}

// A loss in [0, 1] from `text`, or an InputError naming `where` (a file line or a list entry).
double parse_loss(const std::string& raw, const std::string& where) {
  const auto first = raw.find_first_not_of(" \t");
  const std::string text =
      first == std::string::npos ? "" : raw.substr(first, raw.find_last_not_of(" \t") - first + 1);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(v)) {
    throw InputError("stats wsr: " + where + ": '" + text + "' is not a number");
  }
  if (v < 0 || v > 1) {
    throw InputError("stats wsr: " + where + ": loss " + text + " is outside [0, 1]");
  }
  return v;
}

// --losses FILE (one loss per line; blank lines skipped) or --losses-list L1,L2,...
std::vector<double> read_losses(const po::variables_map& vm) {
  const bool file = vm.count("losses") > 0;
  const bool list = vm.count("losses-list") > 0;
  if (file == list) {
    throw InputError("stats wsr: give exactly one of --losses FILE and --losses-list L1,L2,...");
  }
  std::vector<double> losses;
  if (list) {
    int j = 0;
    for (const auto& field : split_commas(vm["losses-list"].as<std::string>())) {
      ++j;
      losses.push_back(parse_loss(field, "--losses-list entry " + std::to_string(j)));
    }
    if (losses.empty()) throw InputError("stats wsr: --losses-list lists no losses");
    return losses;
  }
  const auto path = vm["losses"].as<std::string>();
  std::ifstream in(path);
  if (!in) throw InputError("stats wsr: --losses " + path + ": cannot be read");
  std::string line;
  std::size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    losses.push_back(parse_loss(line, path + ":" + std::to_string(line_number)));
  }
  if (losses.empty()) throw InputError("stats wsr: --losses " + path + ": no losses");
  return losses;
}

int wsr(const po::variables_map& vm, bool as_json) {
  const auto losses = read_losses(vm);
  const double delta = open_unit(vm, "delta", "wsr");
  const double mean = stats::mean_loss(losses, "stats wsr: losses");
  const double upper = stats::wsr_upper_bound(losses, delta);
  nlohmann::json out = {
      {"n", losses.size()}, {"mean", mean}, {"delta", delta}, {"upper_bound", upper}};
  std::optional<double> p;
  double alpha = 0;
  if (alpha_given(vm)) {
    alpha = open_unit(vm, "alpha", "wsr");
    p = stats::wsr_p_value(losses, alpha, delta);
    out["alpha"] = alpha;
    out["p_value"] = *p;
    out["bet_delta"] = delta;
  }
  if (as_json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "n = " << losses.size() << " losses, mean = " << fixed(mean, 6)
            << ", delta = " << general(delta)
            << "   (Waudby-Smith-Ramdas betting, predictable plug-in bets, in the given order)\n"
            << "upper bound (1 - delta)   " << fixed(upper, 6) << "\n";
  if (p) {
    std::cout << "p-value of E[loss] >= " << general(alpha) << "   " << general(*p)
              << "   (1 / max_t capital, bets tuned at delta; p <= delta iff bound <= alpha)\n";
  }
  return 0;
}

int power(const po::variables_map& vm, bool as_json) {
  const auto n = positive_n(vm, "power");
  const double eps = open_unit(vm, "epsilon", "power");
  const double delta = open_unit(vm, "delta", "power");
  const double rate = open_unit(vm, "rate", "power");
  const auto k = stats::max_certifiable_violations(n, eps, delta);
  const double p = stats::certification_power(n, eps, delta, rate);
  if (as_json) {
    std::cout << nlohmann::json({{"n", n},
                                 {"epsilon", eps},
                                 {"delta", delta},
                                 {"rate", rate},
                                 {"k_star", k < 0 ? nlohmann::json(nullptr) : nlohmann::json(k)},
                                 {"power", p}})
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "n = " << n << ", epsilon = " << general(eps) << ", delta = " << general(delta)
            << ", true violation rate = " << general(rate)
            << "   (certify iff K <= K*; power = P{Bin(n, rate) <= K*})\n"
            << "K*        "
            << (k < 0 ? std::string("none: nothing is certifiable") : std::to_string(k))
            << "\npower     " << fixed(p, 6) << "\n";
  return 0;
}

int sample_size(const po::variables_map& vm, bool as_json) {
  const double eps = open_unit(vm, "epsilon", "sample-size");
  const double delta = open_unit(vm, "delta", "sample-size");
  const double rate = open_unit(vm, "rate", "sample-size");
  const double target = open_unit(vm, "power", "sample-size");
  if (rate >= eps) {
    std::ostringstream msg;
    msg << "stats sample-size: --rate must be below --epsilon (got rate " << rate << ", epsilon "
        << eps << "): at rate >= epsilon the certification probability never "
        << "exceeds delta";
    throw InputError(msg.str());
  }
  const auto n_max = vm["n-max"].as<std::int64_t>();
  if (n_max < 1 || n_max > stats::kMaxSampleSizeSearch) {
    throw InputError("stats sample-size: --n-max must lie in [1, " +
                     std::to_string(stats::kMaxSampleSizeSearch) + "] (got " +
                     std::to_string(n_max) + ")");
  }
  const auto s = stats::certification_sample_size(eps, delta, rate, target, n_max);
  const auto or_null = [](bool present, auto v) {
    return present ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  if (as_json) {
    std::cout << nlohmann::json({{"epsilon", eps},
                                 {"delta", delta},
                                 {"rate", rate},
                                 {"target_power", target},
                                 {"n_max", n_max},
                                 {"found", s.found},
                                 {"n", or_null(s.found, s.n)},
                                 {"power", or_null(s.found, s.power)},
                                 {"k_star", or_null(s.found, s.k_star)},
                                 {"stable_n", or_null(s.stable_n > 0, s.stable_n)},
                                 {"stable_power", or_null(s.stable_n > 0, s.stable_power)},
                                 {"stable_k_star", or_null(s.stable_n > 0, s.stable_k_star)},
                                 {"power_at_n_max", s.power_at_n_max}})
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "epsilon = " << general(eps) << ", delta = " << general(delta)
            << ", true violation rate = " << general(rate) << ", target power = " << general(target)
            << "   (searched n = 1.." << n_max << ")\n";
  if (!s.found) {
    std::cout << "not reached: power at n = " << n_max << " is " << fixed(s.power_at_n_max, 6)
              << " (raise --n-max)\n";
    return 0;
  }
  std::cout << "n         " << s.n << "   (smallest n with power >= target)\npower     "
            << fixed(s.power, 6) << "\nK*        " << s.k_star << "\n";
  if (s.stable_n > 0) {
    std::cout << "stable n  " << s.stable_n << "   (power >= target for every n from here to "
              << n_max << "; power " << fixed(s.stable_power, 6) << ", K* " << s.stable_k_star
              << ")\n";
  } else {
    std::cout << "stable n  none up to " << n_max << " (power at n-max "
              << fixed(s.power_at_n_max, 6) << ")\n";
  }
  std::cout << "(power is a saw-tooth in n: K* grows by whole steps, so a few more requests can "
               "lower it)\n";
  return 0;
}

}  // namespace

Command stats_command() {
  Command c;
  c.name = "stats";
  c.summary =
      "a calculator for certification and interval claims (kmax, certify, cp, bootstrap, hb, wsr, "
      "power, sample-size)";
  c.usage =
      "kvaudit stats kmax --n N --epsilon E --delta D\n"
      "       kvaudit stats certify --n N --epsilon E --delta D --violations K1,K2,...\n"
      "       kvaudit stats cp --x X --n N [--alpha A] [--m M] | [--match LOW,HIGH [--max-m M]]\n"
      "       kvaudit stats bootstrap --a FILE --b FILE [--resamples B] [--seed S]\n"
      "       kvaudit stats hb --mean R --n N --alpha A\n"
      "       kvaudit stats wsr --losses FILE | --losses-list L1,L2,... --delta D [--alpha A]\n"
      "       kvaudit stats power --n N --epsilon E --delta D --rate R\n"
      "       kvaudit stats sample-size --epsilon E --delta D --rate R --power P [--n-max N]";
  c.options = [](po::options_description& d, po::positional_options_description& p) {
    d.add_options()("calculation", po::value<std::string>()->required(),
                    "kmax, certify, cp, bootstrap, hb, wsr, power or sample-size")(
        "n", po::value<std::int64_t>(), "calibration requests / trials")(
        "epsilon", po::value<double>(), "maximum violation rate, in (0, 1)")(
        "delta", po::value<double>(), "error budget, in (0, 1)")(
        "violations", po::value<std::string>(), "K_1,K_2,... in the preregistered order")(
        "x", po::value<std::int64_t>(), "successes")(
        "alpha", po::value<double>()->default_value(0.05), "family-wise error rate")(
        "m", po::value<int>()->default_value(1), "Bonferroni family size")(
        "match", po::value<std::string>(), "LOW,HIGH: find the m that prints this interval")(
        "max-m", po::value<int>()->default_value(10000), "largest m searched by --match")(
        "a", po::value<std::string>(), "per-instance scores of arm a (one per line or CSV)")(
        "b", po::value<std::string>(), "per-instance scores of arm b, paired with a")(
        "resamples", po::value<std::int64_t>()->default_value(50000), "bootstrap replicates B")(
        "seed", po::value<std::string>()->default_value("0"),
        "Philox key, an integer in [0, 2^64 - 1]")("mean", po::value<double>(),
                                                   "hb: mean loss r_hat, in [0, 1]")(
        "losses", po::value<std::string>(), "wsr: file of losses in [0, 1], one per line")(
        "losses-list", po::value<std::string>(), "wsr: L1,L2,... losses in [0, 1]")(
        "rate", po::value<double>(), "power, sample-size: true violation rate, in (0, 1)")(
        "power", po::value<double>(), "sample-size: target power, in (0, 1)")(
        "n-max", po::value<std::int64_t>()->default_value(100000),
        "sample-size: largest n searched")("json", "print one JSON object");
    p.add("calculation", 1);
  };
  c.body = [](const po::variables_map& vm) -> int {
    const auto what = vm["calculation"].as<std::string>();
    const bool as_json = vm.count("json") > 0;
    if (what == "kmax") return kmax(vm, as_json);
    if (what == "certify") return certify(vm, as_json);
    if (what == "cp") return cp(vm, as_json);
    if (what == "bootstrap") return bootstrap(vm, as_json);
    if (what == "hb") return hb(vm, as_json);
    if (what == "wsr") return wsr(vm, as_json);
    if (what == "power") return power(vm, as_json);
    if (what == "sample-size") return sample_size(vm, as_json);
    throw InputError("stats: unknown calculation '" + what +
                     "' (expected kmax, certify, cp, bootstrap, hb, wsr, power or sample-size)");
  };
  return c;
}

}  // namespace kvaudit::cli

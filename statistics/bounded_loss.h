// p-values and upper confidence bounds for the mean of a loss bounded in [0, 1] (issue 17: the
// `risk = "mean_loss"` contracts, e.g. loss = clip(U_full − U_policy, 0, 1)); docs/design/
// statistics.md §Bounded-loss risks, procedures and planning.
//
// Hoeffding–Bentkus (Learn then Test, Angelopoulos, Bates, Candès, Jordan & Lei 2021,
// arXiv:2110.01052, Prop. 3 and the p^HB of §3.1; the same as MAPIE 1.6's
// mapie/risk_control/methods.py compute_hoeffding_bentkus_p_value):
//   H0: E[loss] > α, losses i.i.d. in [0, 1], sample mean r̂ over n.
//   p^H = exp(−n·h1(min(r̂, α), α)),  h1(a, b) = a·log(a/b) + (1−a)·log((1−a)/(1−b))  (0·log 0 = 0)
//   p^B = e·P{Bin(n, α) ≤ ⌈n·r̂⌉}
//   p^HB = min(p^H, p^B) ≤ 1.
// ⌈n·r̂⌉ is computed as ⌈n·r̂ − 1e-9⌉: r̂ = K/n is rarely exact in double (7/100·100 is
// 7.000000000000001), and the guard keeps a 0/1 loss column at its count K (MAPIE's plain
// np.ceil would give K + 1 there, a larger p). The same 1e-9 as the violation cap (binomial.h).
//
// Waudby-Smith–Ramdas betting bound (WSR, "Estimating means of bounded random variables by
// betting", JRSS-B 2023, the predictable plug-in bets for a fixed n; used as "WSR" by RCPS:
// Bates, Angelopoulos, Lei, Malik & Jordan 2021, "Distribution-free, risk-controlling prediction
// sets", J. ACM; github.com/aangelopoulos/rcps core/bounds.py WSR_mu_plus; MAPIE 1.6
// mapie/risk_control/methods.py get_r_hat_plus(bound="wsr"); confseq 0.0.11 betting.py
// betting_mart with lambda_predmix_eb(fixed_n = n), truncation 1, one-sided). For losses
// x_1..x_n in the given (calibration) order:
//   μ̂_i = (1/2 + Σ_{j≤i} x_j) / (i + 1),   σ̂²_i = (1/4 + Σ_{j≤i} (x_j − μ̂_j)²) / (i + 1),
//   σ̂²_0 = 1/4,   ν_i = min(1, sqrt(2·log(1/δ_b) / (n·σ̂²_{i−1})))     (predictable bets)
//   K_t(R) = Π_{i≤t} (1 − ν_i·(x_i − R)),   F(R) = max_{0≤t≤n} log K_t(R)   (K_0 = 1)
// If E[x_i | past] ≥ R then K_t(R) is a non-negative supermartingale with K_0 = 1 (ν_i ∈ [0, 1]
// makes every factor ≥ R ≥ 0), so by Ville's inequality P(max_t K_t(R) ≥ 1/δ) ≤ δ.
//   upper bound  u = inf{R ∈ [0, 1] : F(R) ≥ log(1/δ)}  (1 when F(1) < log(1/δ)); bets δ_b = δ.
//     F is non-decreasing in R (each factor is), so the confidence set {R : F(R) < log(1/δ)} is
//     [0, u) and P(E[x] ≥ u) ≤ δ. u is found by bisection to the last double (returns the upper
//     end, so it never undershoots); RCPS solves the same equation with brentq.
//   p-value      p(α) = min(1, 1 / max_t K_t(α)) = exp(−F(α)), for H0: E[loss] ≥ α.
//     Valid because the bets do not depend on α or on any threshold: P(p ≤ u) =
//     P(max_t K_t(α) ≥ 1/u) ≤ u for every u by Ville's inequality, under H0. With δ_b = δ,
//     p(α) ≤ δ exactly when u(δ) ≤ α, so LTT with this p-value certifies the candidates whose
//     WSR upper bound is ≤ α. The test is anytime-valid, but here it is used at the fixed n.
// The bound depends on the order of the losses (the bets are predictable): pass them in the
// calibration order, fixed before the data are seen. MAPIE's get_r_hat_plus restricts R to its
// λ grid and adds the maxima of two halves of the sequence; confseq's betting_cs uses an R grid
// of `breaks` points; neither changes the construction above (tests/statistics/
// bounded_loss_test.cpp compares with both and with confseq's martingale at exact points).
//
// Every function validates its inputs and throws kvaudit::InputError naming the argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvaudit::stats {

// The δ_b that tunes the WSR bets when wsr_p_value is not given one (pass the contract's δ to
// get p ≤ δ ⟺ wsr_upper_bound(losses, δ) ≤ α).
inline constexpr double kDefaultWsrBetDelta = 0.05;

// Hoeffding–Bentkus p-value of H0: E[loss] > alpha. Requires r_hat in [0, 1], 1 ≤ n ≤ 2^53,
// alpha in (0, 1).
double hoeffding_bentkus_p_value(double r_hat, std::int64_t n, double alpha);

// Its two parts, p^H and p^B (e·cdf, may exceed 1), for reports and tests.
double hoeffding_p_value(double r_hat, std::int64_t n, double alpha);
double bentkus_p_value(double r_hat, std::int64_t n, double alpha);

// The WSR (1 − delta) upper confidence bound on E[loss]. Requires a non-empty column of finite
// losses in [0, 1] and delta in (0, 1).
double wsr_upper_bound(const std::vector<double>& losses, double delta);

// The WSR p-value of H0: E[loss] ≥ alpha, bets tuned at bet_delta. Requires the losses as above,
// alpha and bet_delta in (0, 1).
double wsr_p_value(const std::vector<double>& losses, double alpha,
                   double bet_delta = kDefaultWsrBetDelta);

// F(R) = max_t log K_t(R) above (bets tuned at bet_delta): the log of the largest capital.
double wsr_log_capital(const std::vector<double>& losses, double r, double bet_delta);

// The mean of a column of losses, each checked finite and in [0, 1]; `what` names the column in
// the InputError (e.g. "results/x: snapkv@0.5 calibration losses"). Refuses an empty column.
double mean_loss(const std::vector<double>& losses, const std::string& what);

// The joint p-value of several risks certified together: max over the risks (valid: the joint
// null "some risk is above its level" is the union of the per-risk nulls, and for any true null
// P(max ≤ u) ≤ P(p_that_risk ≤ u) ≤ u; LTT §4). Requires a non-empty list of values in [0, 1].
double joint_p_value(const std::vector<double>& per_risk);

}  // namespace kvaudit::stats

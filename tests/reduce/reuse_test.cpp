// Reuse cells in the reduce (docs/design/reuse.md §Reduce: which intervals resample contexts):
// paired rows with a reuse arm and reuse accuracy rows go through the stratified cluster bootstrap
// (cluster = context, stratum = task), bit for bit what statistics/cluster_bootstrap.h computes on
// the same data; on data with a planted context-level correlation their intervals are wider than
// the per-question bootstrap's; with one question per context they equal the query-agnostic
// numbers exactly; the report says how reuse intervals were resampled and that reuse cells are not
// certified.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/errors.h"
#include "statistics/cluster_bootstrap.h"
#include "statistics/paired_bootstrap.h"
#include "suite/reduce/paired_rows.h"
#include "tests/reduce/test_support.h"

namespace kvaudit::reduce::testing {
namespace {

constexpr std::uint32_t kContexts = 40;
constexpr std::uint32_t kQuestions = 4;

// 40 contexts × 4 questions of 0/1 utilities with a planted context effect: question q uses its
// context's latent uniforms with probability rho (question 0 always), else its own. A method
// (p = 0.7) against a baseline (p = 0.45).
std::vector<PairedInstance> correlated_pairs(std::uint32_t contexts, std::uint32_t questions,
                                             double rho, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<PairedInstance> out;
  for (std::uint32_t c = 0; c < contexts; ++c) {
    const double shared_a = u(rng), shared_b = u(rng);
    for (std::uint32_t q = 0; q < questions; ++q) {
      const double own_a = u(rng), own_b = u(rng), coin = u(rng);
      const bool shared = q == 0 || coin < rho;
      PairedInstance p;
      p.task = 0;
      p.instance = c;
      p.question = q;
      p.a = (shared ? shared_a : own_a) < 0.7 ? 1.0 : 0.0;
      p.b = (shared ? shared_b : own_b) < 0.45 ? 1.0 : 0.0;
      out.push_back(p);
    }
  }
  return out;
}

BootstrapSettings settings_for_test() {
  BootstrapSettings s;
  s.resamples = 4000;
  s.seed = 20261202;
  s.threads = 2;
  return s;
}

stats::BootstrapOptions options_of(const BootstrapSettings& s) {
  stats::BootstrapOptions o;
  o.resamples = s.resamples;
  o.seed = s.seed;
  o.confidence = 1 - s.alpha;
  o.threads = s.threads;
  o.keep_sorted_replicates = true;
  return o;
}

// The same pairs as one clustered comparison (stratum per task with the given id, cluster =
// context), in (task, context, question) order as the reduce sorts them.
stats::ClusteredPairedComparison clustered_comparison(std::vector<PairedInstance> pairs,
                                                      std::uint32_t stratum_id) {
  std::sort(pairs.begin(), pairs.end(), [](const PairedInstance& x, const PairedInstance& y) {
    return std::tie(x.task, x.instance, x.question) < std::tie(y.task, y.instance, y.question);
  });
  stats::ClusteredPairedComparison cmp;
  cmp.name = "direct";
  stats::ClusteredPairedStratum st;
  st.id = stratum_id;
  for (const auto& p : pairs) {
    st.arm_a.push_back(p.a);
    st.arm_b.push_back(p.b);
    st.cluster.push_back(static_cast<std::uint32_t>(p.instance));
  }
  cmp.strata.push_back(std::move(st));
  return cmp;
}

// The same pairs as a per-question row: every (context, question) its own instance.
PairedRow per_question_row(const std::vector<PairedInstance>& pairs, std::uint32_t questions) {
  PairedRow row;
  row.name = "per-question";
  for (auto p : pairs) {
    p.instance = p.instance * questions + p.question;
    p.question = 0;
    row.instances.push_back(p);
  }
  return row;
}

TEST(ReuseRows, ClusteredRowIsTheClusterBootstrapBitForBit) {
  const auto pairs = correlated_pairs(kContexts, kQuestions, 0.5, 7);
  PairedRow row;
  row.name = "reuse";
  row.instances = pairs;
  std::reverse(row.instances.begin(), row.instances.end());  // any order
  row.clustered = true;
  const auto settings = settings_for_test();
  const auto got = run_paired_rows({row}, {kContexts}, settings).at(0);

  auto direct =
      stats::cluster_paired_bootstrap_batch({clustered_comparison(pairs, 0)}, options_of(settings))
          .at(0);
  EXPECT_TRUE(got.clustered);
  EXPECT_EQ(got.test, "cluster-bootstrap");
  EXPECT_EQ(got.instances, kContexts * kQuestions);
  EXPECT_EQ(got.clusters, kContexts);
  EXPECT_EQ(got.estimate, direct.estimate);
  EXPECT_EQ(got.ci_lower, direct.lower);
  EXPECT_EQ(got.ci_upper, direct.upper);
  EXPECT_EQ(got.p_bootstrap, direct.p_value);
  EXPECT_EQ(got.p_test, direct.p_value);
  EXPECT_EQ(got.replicate_hash, direct.replicate_hash);
  EXPECT_EQ(got.family_lower, stats::quantile_type7(direct.sorted_replicates, settings.alpha / 2));
  EXPECT_EQ(got.family_upper,
            stats::quantile_type7(direct.sorted_replicates, 1 - settings.alpha / 2));
}

TEST(ReuseRows, ClusterIntervalIsWiderThanThePerQuestionBootstrap) {
  const auto pairs = correlated_pairs(kContexts, kQuestions, 0.5, 7);
  PairedRow clustered;
  clustered.name = "reuse";
  clustered.instances = pairs;
  clustered.clustered = true;
  const auto settings = settings_for_test();
  const auto results =
      run_paired_rows({clustered, per_question_row(pairs, kQuestions)},
                      {static_cast<std::int64_t>(kContexts * kQuestions)}, settings);
  const double cluster_width = results[0].ci_upper - results[0].ci_lower;
  const double naive_width = results[1].ci_upper - results[1].ci_lower;
  std::printf(
      "cluster interval [%.4f, %.4f] width %.4f; per-question [%.4f, %.4f] width %.4f; "
      "ratio %.3f\n",
      results[0].ci_lower, results[0].ci_upper, cluster_width, results[1].ci_lower,
      results[1].ci_upper, naive_width, cluster_width / naive_width);
  EXPECT_EQ(results[0].estimate, results[1].estimate);
  EXPECT_EQ(results[1].test, "bootstrap");
  // Two questions share their context's uniforms with probability 1/2 (question 0 with q ≥ 1) or
  // 1/4 (q, q' ≥ 1): mean intra-context correlation ρ ≈ 0.375, expected ratio √(1 + 3ρ) ≈ 1.46.
  EXPECT_GT(cluster_width, 1.15 * naive_width);
}

TEST(ReuseRows, OneQuestionPerContextEqualsThePerQuestionRow) {
  // 60 contexts (≥ 50, so the per-question row uses the bootstrap, not McNemar).
  const auto pairs = correlated_pairs(60, 1, 0.5, 9);
  PairedRow clustered;
  clustered.name = "reuse";
  clustered.instances = pairs;
  clustered.clustered = true;
  PairedRow plain = clustered;
  plain.clustered = false;
  const auto settings = settings_for_test();
  const auto r = run_paired_rows({clustered, plain}, {60}, settings);
  EXPECT_EQ(r[0].test, "cluster-bootstrap");
  EXPECT_EQ(r[1].test, "bootstrap");
  EXPECT_EQ(r[0].estimate, r[1].estimate);
  EXPECT_EQ(r[0].ci_lower, r[1].ci_lower);
  EXPECT_EQ(r[0].ci_upper, r[1].ci_upper);
  EXPECT_EQ(r[0].family_lower, r[1].family_lower);
  EXPECT_EQ(r[0].family_upper, r[1].family_upper);
  EXPECT_EQ(r[0].p_test, r[1].p_test);
  EXPECT_EQ(r[0].p_test_less, r[1].p_test_less);
  EXPECT_EQ(r[0].p_two_sided, r[1].p_two_sided);
  EXPECT_EQ(r[0].replicate_hash, r[1].replicate_hash);
}

// --- End to end: a synthetic study with reuse cells through reduce_study --------------------

// One RULER task with a multi-question form (niah_multiquery: 4 questions per context; the
// manifest refuses reuse on tasks without one), under query-agnostic and reuse.
SyntheticConfig reuse_config(std::uint32_t questions, std::int64_t contexts = kContexts) {
  SyntheticConfig c;
  c.name = "reuse";
  c.models = {"model-a"};
  c.base = {0.85};
  c.backends = {"sdpa"};
  c.tasks = {"niah_multiquery"};
  c.instances = contexts;
  c.compression = {0.5};
  c.protocols = {"query-agnostic"};
  c.reuse_questions = questions;
  c.reuse_rho = 0.5;
  c.certified_methods = {"keydiff"};
  c.certify_reuse = true;
  c.calibration = 20;
  c.test = 20;
  c.bootstrap_resamples = 2000;
  c.ranks = 2;
  return c;
}

class ReuseStudy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::path(KVAUDIT_REDUCE_TEST_TMP) /
           ("ReuseStudy.pid" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    study_ = new SyntheticStudy(write_synthetic_study(dir_, cfg_));
    result_ = new ReduceResult(reduce_study(options_for(*study_)));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete study_;
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  static std::uint8_t reuse_code() { return static_cast<std::uint8_t>(Protocol::reuse); }

  // The pairs of a baseline_wins row rebuilt from the frame: per (task, context, question) the
  // method's utility and the chosen baseline's.
  static std::vector<PairedInstance> rebuilt_pairs(const PairedAnalysisRow& row) {
    const StudyFrame& f = *result_->frame;
    const BaselineWins& wins = result_->baseline_wins;
    std::map<std::tuple<std::uint32_t, std::int64_t, std::uint32_t>, PairedInstance> pairs;
    std::map<std::uint32_t, std::int16_t> chosen;  // task -> baseline method
    for (const auto& ch : wins.choices)
      if (ch.protocol == row.key[3] && ch.budget == row.key[5]) chosen[ch.task] = ch.chosen;
    std::map<std::tuple<std::uint32_t, std::int64_t, std::uint32_t, std::int16_t>, double> score;
    for (const FrameCell& c : f.cells)
      if (c.protocol == row.key[3] && c.budget == row.key[5] && c.state == CellState::ok)
        score[{c.task, c.instance, c.question, c.method}] = c.score;
    for (const FrameCell& c : f.cells) {
      if (c.protocol != row.key[3] || c.budget != row.key[5] || c.method != row.key[4]) continue;
      PairedInstance p;
      p.task = c.task;
      p.instance = c.instance;
      p.question = c.question;
      p.a = score.at({c.task, c.instance, c.question, c.method});
      p.b = score.at({c.task, c.instance, c.question, chosen.at(c.task)});
      pairs[{c.task, c.instance, c.question}] = p;
    }
    std::vector<PairedInstance> out;
    for (const auto& [key, p] : pairs) out.push_back(p);
    return out;
  }

  static const PairedAnalysisRow& keydiff_row(std::uint8_t protocol) {
    const auto& m = result_->study->manifest;
    for (const auto& r : result_->baseline_wins.comparisons.rows)
      if (r.key[3] == protocol &&
          m.methods[static_cast<std::size_t>(r.key[4])].name == std::string("keydiff"))
        return r;
    throw std::runtime_error("no keydiff row");
  }

  static inline std::filesystem::path dir_;
  static inline SyntheticConfig cfg_ = reuse_config(kQuestions);
  static inline SyntheticStudy* study_ = nullptr;
  static inline ReduceResult* result_ = nullptr;
};

TEST_F(ReuseStudy, FrameHasOneRowPerCellAndQuestion) {
  const StudyFrame& f = *result_->frame;
  std::int64_t reuse_rows = 0, other_rows = 0;
  for (const FrameCell& c : f.cells) {
    if (is_reuse(c)) {
      ++reuse_rows;
      EXPECT_EQ(c.n_questions, kQuestions);
      ASSERT_NE(c.record, nullptr);
      EXPECT_EQ(c.record->question, c.question);
    } else {
      ++other_rows;
      EXPECT_EQ(c.question, 0u);
    }
  }
  // 40 contexts × (5 methods + full KV) cells per protocol.
  EXPECT_EQ(other_rows, 240);
  EXPECT_EQ(reuse_rows, 240 * kQuestions);
  EXPECT_TRUE(result_->complete());
  EXPECT_EQ(result_->coverage.total.expected, 240 * (1 + kQuestions));
}

TEST_F(ReuseStudy, BaselineWinsReuseRowIsTheClusterBootstrapOfItsPairs) {
  const PairedAnalysisRow& row = keydiff_row(reuse_code());
  EXPECT_TRUE(row.result.clustered);
  EXPECT_EQ(row.result.test, "cluster-bootstrap");
  EXPECT_EQ(row.result.instances, kContexts * kQuestions);
  EXPECT_EQ(row.result.clusters, kContexts);
  // Rebuild the comparison (stratum = the global task id 0, cluster = context) and run it through
  // the statistics library directly.
  const auto pairs = rebuilt_pairs(row);
  const auto direct = stats::cluster_paired_bootstrap_batch({clustered_comparison(pairs, 0)},
                                                            options_of(result_->bootstrap))
                          .at(0);
  EXPECT_EQ(row.result.estimate, direct.estimate);
  EXPECT_EQ(row.result.ci_lower, direct.lower);
  EXPECT_EQ(row.result.ci_upper, direct.upper);
  EXPECT_EQ(row.result.p_bootstrap, direct.p_value);
  EXPECT_EQ(row.result.replicate_hash, direct.replicate_hash);

  // The same pairs resampled per question (every (context, question) its own instance): narrower.
  PairedRow naive;
  naive.name = "per-question";
  for (auto p : pairs) {
    p.instance = p.instance * kQuestions + p.question;
    p.question = 0;
    naive.instances.push_back(p);
  }
  const std::int64_t n = kContexts * kQuestions;
  const auto per_question = run_paired_rows({naive}, {n}, result_->bootstrap).at(0);
  const double cluster_width = row.result.ci_upper - row.result.ci_lower;
  const double naive_width = per_question.ci_upper - per_question.ci_lower;
  std::printf(
      "keydiff vs best baseline (reuse): cluster width %.4f, per-question width %.4f, "
      "ratio %.3f\n",
      cluster_width, naive_width, cluster_width / naive_width);
  EXPECT_EQ(per_question.estimate, row.result.estimate);
  EXPECT_GT(cluster_width, 1.1 * naive_width);
}

TEST_F(ReuseStudy, ReuseAccuracyRowsUseTheClusterBootstrapAtTheFamilyLevel) {
  const StudyFrame& f = *result_->frame;
  const double a = result_->accuracy.family.per_comparison_alpha();
  std::int64_t reuse_rows = 0;
  for (const AccuracyRow& r : result_->accuracy.rows) {
    if (r.protocol != reuse_code()) {
      EXPECT_EQ(r.interval, "clopper-pearson");
      continue;
    }
    ++reuse_rows;
    EXPECT_EQ(r.interval, "cluster-bootstrap");
    EXPECT_EQ(r.n, kContexts * kQuestions);
    EXPECT_EQ(r.contexts, kContexts);
    std::vector<PairedInstance> pairs;
    for (const FrameCell& c : f.cells)
      if (c.protocol == r.protocol && c.method == r.method && c.budget == r.budget &&
          c.task == r.task && c.state == CellState::ok)
        pairs.push_back(PairedInstance{c.task, c.instance, c.question, c.score, 0.0, 1});
    auto options = options_of(result_->bootstrap);
    options.confidence = 1 - a;
    options.keep_sorted_replicates = false;
    const auto direct =
        stats::cluster_paired_bootstrap(clustered_comparison(pairs, r.task), options);
    EXPECT_EQ(r.mean, direct.estimate);
    EXPECT_EQ(r.lower, std::max(0.0, direct.lower));
    EXPECT_EQ(r.upper, std::min(1.0, direct.upper));
  }
  EXPECT_EQ(reuse_rows, 6);  // 5 methods + full KV, one budget each
}

TEST_F(ReuseStudy, ReuseBlocksAreNotCertified) {
  bool saw_reuse = false, saw_agnostic = false;
  for (const auto& run : result_->certification.runs) {
    if (run.protocol == "reuse") {
      saw_reuse = true;
      EXPECT_FALSE(run.computed);
      EXPECT_EQ(run.not_computed_reason, kReuseNotCertified);
    } else {
      saw_agnostic = true;
      EXPECT_TRUE(run.computed);
    }
  }
  EXPECT_TRUE(saw_reuse);
  EXPECT_TRUE(saw_agnostic);
}

TEST_F(ReuseStudy, ReportSaysHowReuseIntervalsWereResampled) {
  const std::string report = read_text(result_->report_dir / "report.md");
  const std::string note = kReuseIntervalNote;
  EXPECT_NE(note.find("intervals resample contexts (cluster bootstrap: all questions of a context "
                      "together)"),
            std::string::npos);
  // Under the accuracy table and the baseline_wins table (each note follows its table's title).
  for (const char* title : {"### Accuracy per task with simultaneous intervals",
                            "### Methods against the best-of-3 trivial baseline"}) {
    const auto at = report.find(title);
    ASSERT_NE(at, std::string::npos) << title;
    const auto next = report.find("\n### ", at + 1);
    const auto note_at = report.find(note, at);
    EXPECT_NE(note_at, std::string::npos) << title;
    EXPECT_LT(note_at, next) << title;
  }
  EXPECT_NE(report.find("Reuse cells are not certified: the Learn-then-Test binomial p-value needs "
                        "independent requests"),
            std::string::npos);
}

// A reuse method without records: each of its cells is k missing rows (k from the other cells of
// the context), and the missing-cells table names the questions.
TEST(ReuseStudyFaults, AMissingReuseCellIsOneMissingRowPerQuestion) {
  const auto dir = fresh_test_dir();
  SyntheticConfig cfg = reuse_config(kQuestions);
  cfg.drop_method = "tova";  // not a baseline, not certified
  cfg.drop_model = "model-a";
  cfg.methods = default_methods();
  cfg.methods.push_back(PlantedMethod{"tova", "tova", "", 0.3, 0.1});
  const auto study = write_synthetic_study(dir, cfg);
  const ReduceResult r = reduce_study(options_for(study));
  // 40 contexts: one query-agnostic cell and k reuse rows each.
  EXPECT_EQ(r.coverage.total.missing, kContexts * (1 + kQuestions));
  const std::string missing = read_text(r.report_dir / "tables" / "missing_cells.csv");
  EXPECT_NE(missing.find(",question"), std::string::npos);
  EXPECT_NE(missing.find(",3 of 4"), std::string::npos);
  for (const FrameCell& c : r.frame->cells) {
    if (is_reuse(c)) {
      EXPECT_EQ(c.n_questions, kQuestions);
    }
  }
}

// Records of one context that disagree on n_questions are refused, naming both cells.
TEST(ReuseStudyFaults, ContextsWhoseCellsDisagreeOnTheQuestionCountAreRefused) {
  const auto dir = fresh_test_dir();
  SyntheticConfig cfg = reuse_config(kQuestions);
  cfg.reuse_short_method = "snapkv";
  const auto study = write_synthetic_study(dir, cfg);
  try {
    reduce_study(options_for(study));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("disagree on n_questions"), std::string::npos) << e.what();
  }
}

// One question per context: every reuse row equals its query-agnostic sibling exactly.
TEST(ReuseStudySingleQuestion, ReuseRowsEqualTheQueryAgnosticRows) {
  const auto dir = fresh_test_dir();
  // 60 contexts: ≥ 50, so the query-agnostic rows use the bootstrap too, not McNemar. (RULER's
  // multi-question form has 4 questions; a LongBench task whose groups are singletons is the
  // real k = 1 case. The reduce does not look at the benchmark.)
  const SyntheticConfig cfg = reuse_config(1, 60);
  const auto study = write_synthetic_study(dir, cfg);
  const ReduceResult r = reduce_study(options_for(study));
  const auto agnostic = static_cast<std::int64_t>(Protocol::query_agnostic);
  const auto reuse = static_cast<std::int64_t>(Protocol::reuse);
  std::map<std::vector<std::int64_t>, const PairedRowResult*> by_key;
  for (const auto& row : r.baseline_wins.comparisons.rows)
    if (row.key[3] == agnostic) {
      auto key = row.key;
      key[3] = reuse;
      by_key[key] = &row.result;
    }
  std::int64_t compared = 0;
  for (const auto& row : r.baseline_wins.comparisons.rows) {
    if (row.key[3] != reuse) continue;
    const PairedRowResult& x = row.result;
    const PairedRowResult& y = *by_key.at(row.key);
    EXPECT_TRUE(x.clustered);
    EXPECT_FALSE(y.clustered);
    EXPECT_EQ(x.instances, y.instances);
    EXPECT_EQ(x.estimate, y.estimate);
    EXPECT_EQ(x.ci_lower, y.ci_lower);
    EXPECT_EQ(x.ci_upper, y.ci_upper);
    EXPECT_EQ(x.family_lower, y.family_lower);
    EXPECT_EQ(x.family_upper, y.family_upper);
    EXPECT_EQ(x.p_bootstrap, y.p_bootstrap);
    EXPECT_EQ(x.p_two_sided, y.p_two_sided);
    EXPECT_EQ(x.replicate_hash, y.replicate_hash);
    ++compared;
  }
  EXPECT_EQ(compared, 2);  // keydiff and snapkv against the best baseline, one budget
  // The report still says how reuse rows were resampled (here: one question each).
  const std::string report = read_text(r.report_dir / "report.md");
  const auto at = report.find("### Methods against the best-of-3 trivial baseline");
  ASSERT_NE(at, std::string::npos);
  const auto note_at = report.find(kReuseIntervalNote, at);
  ASSERT_NE(note_at, std::string::npos);
  EXPECT_LT(note_at, report.find("\n### ", at + 1));
}

}  // namespace
}  // namespace kvaudit::reduce::testing

// UnitExecutor (suite/run/unit_executor.h) on tiny studies written by the tests themselves:
//  * the embedded default model SmolLM2-135M-Instruct (GGUF Q4_1; skips, saying why, when absent)
//    on RULER niah_single_1 at 512 tokens with full KV, knorm, snapkv, streaming_llm (compression
//    0.5) and refreekv (threshold), both protocols, both backends: every record field of every cell
//    (ids, names, digest, budget fields, token counts, kept tokens and bytes against the budget
//    arithmetic, realised retention, score, timings); the full-KV answers are printed;
//  * the same unit executed again (same executor, and a fresh one with the cells reversed) gives
//    identical non-timing fields;
//  * a configured runtime context below the instance's length -> every cell `excluded`;
//  * a LongBench task read from a JSONL file -> scored records;
//  * an unreadable model file -> every cell `error` naming the file (needs no model).
#include "suite/run/unit_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "methods/method.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/records/content_digests.h"

namespace kvaudit::run {
namespace {

namespace fs = std::filesystem;
using records::CellRecord;
using records::CellStatus;

const fs::path kGguf(KVAUDIT_DEFAULT_GGUF);

fs::path test_dir(const std::string& name) {
  const fs::path dir = fs::path(KVAUDIT_RUN_TEST_TMP) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A parsed manifest, its expansion and each unit's cells.
struct Study {
  manifest::Manifest manifest;
  manifest::Expansion expansion;
  std::vector<std::vector<const manifest::Cell*>> cells_of;  // per unit index

  Study(const std::string& text, const fs::path& file)
      : manifest(manifest::parse_manifest(text, file)), expansion(manifest::expand(manifest)) {
    cells_of.resize(expansion.units.size());
    for (const auto& cell : expansion.cells) cells_of[cell.unit].push_back(&cell);
  }
};

// `benchmark_extra`: more lines of the RULER benchmark's table.
std::string ruler_manifest(const fs::path& model, const std::string& benchmark_extra = "") {
  return R"([study]
name = "unitexec-test"
seed = 7
output_dir = "out"

[[models]]
name = "smollm2"
path = ")" +
         model.string() + R"("
format = "gguf"
chat_template = "chatml"
dtype = "f32"

[[benchmarks]]
name = "ruler-512"
kind = "ruler"
tasks = ["niah_single_1"]
length = 512
instances = 1
essay = "builtin"
)" + benchmark_extra +
         R"(
[methods.knorm]
[methods.snapkv]
[methods.streaming_llm]
[methods.refreekv]

[[grids]]
name = "ratios"
benchmarks = ["ruler-512"]
methods = ["knorm", "snapkv", "streaming_llm"]
compression = [0.5]
protocols = ["query-aware", "query-agnostic"]
backends = ["sdpa", "eager"]

[[grids]]
name = "thresholds"
benchmarks = ["ruler-512"]
methods = ["refreekv"]
thresholds = [0.01]
protocols = ["query-aware", "query-agnostic"]
backends = ["sdpa", "eager"]
)";
}

bool is_hex16(const std::string& s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(),
                                       [](char c) { return std::isxdigit(c) && !std::isupper(c); });
}

UnitExecutorOptions options_for(std::int32_t rank, std::int32_t attempt,
                                std::optional<std::int64_t> max_context = std::nullopt) {
  UnitExecutorOptions options;
  options.rank = rank;
  options.attempt = attempt;
  options.max_context = max_context;
  return options;
}

bool same_double(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Every field except the timings (t_start_ns, t_end_ns, prefill_ms, decode_ms, the cell_*_ms
// costs and shared_costs, which depend on the cells run together) and threads.
void expect_same_non_timing(const CellRecord& a, const CellRecord& b) {
  EXPECT_EQ(a.cell_id, b.cell_id);
  EXPECT_EQ(a.unit_id, b.unit_id);
  EXPECT_EQ(a.attempt, b.attempt);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.benchmark, b.benchmark);
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.method_id, b.method_id);
  EXPECT_EQ(a.params_digest, b.params_digest);
  EXPECT_EQ(a.attention_backend, b.attention_backend);
  EXPECT_EQ(a.protocol, b.protocol);
  EXPECT_EQ(a.split, b.split);
  EXPECT_EQ(a.budget_kind, b.budget_kind);
  EXPECT_TRUE(same_double(a.compression, b.compression));
  EXPECT_TRUE(same_double(a.retention, b.retention));
  EXPECT_TRUE(same_double(a.threshold, b.threshold));
  EXPECT_EQ(a.instance, b.instance);
  EXPECT_EQ(a.nominal_length, b.nominal_length);
  EXPECT_EQ(a.n_prompt_tokens, b.n_prompt_tokens);
  EXPECT_EQ(a.n_context_tokens, b.n_context_tokens);
  EXPECT_EQ(a.n_question_tokens, b.n_question_tokens);
  EXPECT_EQ(a.n_generated_tokens, b.n_generated_tokens);
  EXPECT_EQ(a.kept_tokens, b.kept_tokens);
  EXPECT_EQ(a.kept_bytes, b.kept_bytes);
  EXPECT_EQ(a.full_bytes, b.full_bytes);
  EXPECT_TRUE(same_double(a.realised_retention, b.realised_retention));
  EXPECT_TRUE(same_double(a.score, b.score));
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.output, b.output);
  EXPECT_EQ(a.prompt_digest, b.prompt_digest);
  EXPECT_EQ(a.kept_digest, b.kept_digest);
  EXPECT_EQ(a.peak_kv_bytes, b.peak_kv_bytes);
  EXPECT_EQ(a.device, b.device);
}

// The full-KV cells of niah_single_1 at 512 tokens: SmolLM2-135M retrieves the needle.
void expect_plausible_full_kv_answers(const std::vector<std::vector<CellRecord>>& all) {
  int full_cells = 0;
  double score_sum = 0;
  for (const auto& unit_records : all) {
    for (const CellRecord& r : unit_records) {
      if (r.method != "full") continue;
      ++full_cells;
      score_sum += r.score;
      EXPECT_EQ(r.status, CellStatus::ok);
      EXPECT_FALSE(r.output.empty());
      // The answer is not cut by the generation budget: the model stops by itself.
      EXPECT_LT(r.n_generated_tokens, 128u) << r.output;
      std::cout << "full KV " << records::enum_name(r.attention_backend) << " "
                << records::enum_name(r.protocol) << ": score " << r.score << " output \""
                << r.output << "\"\n";
    }
  }
  EXPECT_EQ(full_cells, 4);  // 2 backends x 2 protocols
  std::cout << "full KV mean score " << score_sum / full_cells << "\n";
  // The needle is retrieved in most full-KV cells (SmolLM2-135M gets all four at this length).
  EXPECT_GE(score_sum / full_cells, 0.5);
}

// The SmolLM2 study, run once per test process.
class SmolLM2StudyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kGguf)) return;
    const fs::path dir = test_dir("smollm2_study");
    study_ = std::make_unique<Study>(ruler_manifest(kGguf), dir / "study.toml");
    executor_ =
        std::make_unique<UnitExecutor>(study_->manifest, study_->expansion, options_for(3, 2));
    records_.resize(study_->expansion.units.size());
    for (std::size_t u = 0; u < study_->expansion.units.size(); ++u) {
      const auto started = std::chrono::steady_clock::now();
      records_[u] = executor_->execute(study_->expansion.units[u], study_->cells_of[u]);
      std::cout << "unit " << u << " ("
                << attention_backend_name(study_->expansion.units[u].attention_backend) << ", "
                << records_[u].size() << " cells): "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
                << " s\n";
    }
  }
  static void TearDownTestSuite() {
    executor_.reset();
    study_.reset();
    records_.clear();
  }
  void SetUp() override {
    if (!fs::exists(kGguf)) {
      GTEST_SKIP() << "the default model " << kGguf
                   << " is absent (tools/setup.sh fetches it); no unit to execute";
    }
  }

  static std::unique_ptr<Study> study_;
  static std::unique_ptr<UnitExecutor> executor_;
  static std::vector<std::vector<CellRecord>> records_;
};

std::unique_ptr<Study> SmolLM2StudyTest::study_;
std::unique_ptr<UnitExecutor> SmolLM2StudyTest::executor_;
std::vector<std::vector<CellRecord>> SmolLM2StudyTest::records_;

TEST_F(SmolLM2StudyTest, EveryCellRecordIsFilledAndFullKvAnswersAreRight) {
  const manifest::Manifest& m = study_->manifest;
  // SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64; f32 -> 4 bytes per element.
  constexpr std::uint64_t kHeads = 30 * 3;
  constexpr std::uint64_t kBytesPerEntry = 2 * 64 * 4;
  ASSERT_EQ(study_->expansion.units.size(), 2u);  // 2 backends x 1 instance
  for (std::size_t u = 0; u < records_.size(); ++u) {
    const manifest::Unit& unit = study_->expansion.units[u];
    const auto& cells = study_->cells_of[u];
    ASSERT_EQ(records_[u].size(), cells.size());
    ASSERT_EQ(cells.size(), 10u);  // (3 ratio methods + refreekv + full) x 2 protocols
    for (std::size_t i = 0; i < cells.size(); ++i) {
      const manifest::Cell& cell = *cells[i];
      const CellRecord& r = records_[u][i];
      SCOPED_TRACE(r.method + " " + std::string(records::enum_name(r.protocol)) + " " +
                   std::string(records::enum_name(r.attention_backend)));
      ASSERT_EQ(r.status, CellStatus::ok) << r.error;
      EXPECT_EQ(r.error, "");
      EXPECT_EQ(r.cell_id, cell.id);
      EXPECT_EQ(r.unit_id, unit.id);
      EXPECT_EQ(r.rank, 3);
      EXPECT_EQ(r.attempt, 2);
      EXPECT_EQ(r.model, "smollm2");
      EXPECT_EQ(r.benchmark, "ruler-512");
      EXPECT_EQ(r.task, "niah_single_1");
      EXPECT_EQ(r.method, manifest::cell_method_name(m, cell));
      EXPECT_TRUE(is_hex16(r.params_digest)) << r.params_digest;
      if (cell.method < 0) {
        EXPECT_EQ(r.method_id, "full");
        EXPECT_EQ(r.params_digest, manifest::params_digest(manifest::canonical_full_method()));
      } else {
        const auto& config = m.methods[static_cast<std::size_t>(cell.method)];
        EXPECT_EQ(r.method_id, config.method);
        EXPECT_EQ(r.params_digest, manifest::params_digest(manifest::canonical_method(m, config)));
      }
      EXPECT_EQ(records::enum_name(r.attention_backend),
                attention_backend_name(unit.attention_backend));
      EXPECT_EQ(records::enum_name(r.protocol), protocol_name(cell.protocol));
      EXPECT_EQ(r.split, records::Split::none);
      EXPECT_EQ(r.instance, 0u);
      EXPECT_EQ(r.nominal_length, 512u);

      // Token counts: the prompt fits the nominal length with the generation budget (128).
      EXPECT_GT(r.n_context_tokens, 200u);
      EXPECT_GT(r.n_question_tokens, 5u);
      EXPECT_GT(r.n_prompt_tokens, r.n_context_tokens + r.n_question_tokens);
      EXPECT_LE(r.n_prompt_tokens + 128u, 512u + 8u);  // the generator's count joins q + suffix
      EXPECT_GE(r.n_generated_tokens, 1u);
      EXPECT_LE(r.n_generated_tokens, 128u);

      // Kept entries and bytes: the boundary is the end of the context (query-agnostic) or of
      // the question (query-aware).
      const std::uint64_t boundary = r.protocol == Protocol::query_agnostic
                                         ? r.n_context_tokens
                                         : r.n_context_tokens + r.n_question_tokens;
      EXPECT_EQ(r.full_bytes, boundary * kHeads * kBytesPerEntry);
      EXPECT_EQ(r.kept_bytes, r.kept_tokens * kBytesPerEntry);
      EXPECT_DOUBLE_EQ(r.realised_retention,
                       static_cast<double>(r.kept_bytes) / static_cast<double>(r.full_bytes));
      // Content digests (records schema 4): present; a full-KV cell kept every position.
      EXPECT_NE(r.prompt_digest, 0u);
      EXPECT_NE(r.kept_digest, 0u);
      switch (cell.budget_kind) {
        case manifest::BudgetKind::none:
          EXPECT_EQ(r.budget_kind, records::BudgetKind::none);
          EXPECT_EQ(r.kept_tokens, boundary * kHeads);
          EXPECT_EQ(r.kept_digest,
                    records::full_kept_digest(30, 3, static_cast<int>(boundary)));  // SmolLM2
          EXPECT_TRUE(std::isnan(r.compression) && std::isnan(r.retention) &&
                      std::isnan(r.threshold));
          break;
        case manifest::BudgetKind::compression:
          EXPECT_EQ(r.budget_kind, records::BudgetKind::compression);
          EXPECT_EQ(r.compression, 0.5);
          EXPECT_EQ(r.retention, 0.5);
          EXPECT_TRUE(std::isnan(r.threshold));
          EXPECT_EQ(r.kept_tokens, static_cast<std::uint64_t>(methods::kept_count(
                                       static_cast<std::int64_t>(boundary), 0.5)) *
                                       kHeads);
          break;
        case manifest::BudgetKind::threshold:
          EXPECT_EQ(r.budget_kind, records::BudgetKind::threshold);
          EXPECT_EQ(r.threshold, 0.01);
          EXPECT_TRUE(std::isnan(r.compression) && std::isnan(r.retention));
          EXPECT_GT(r.realised_retention, 0.0);
          EXPECT_LE(r.realised_retention, 1.0);
          break;
        case manifest::BudgetKind::retention:
          ADD_FAILURE() << "the study declares no retention cells";
          break;
      }
      EXPECT_GE(r.score, 0.0);
      EXPECT_LE(r.score, 1.0);
      EXPECT_GT(r.t_start_ns, 1'600'000'000'000'000'000);
      EXPECT_GE(r.t_end_ns, r.t_start_ns);
      EXPECT_GT(r.prefill_ms, 0.0);
      EXPECT_GT(r.decode_ms, 0.0);
      // Schema-5 costs: the cell's own or apportioned share of each step it has.
      EXPECT_GT(r.cell_prefill_ms, 0.0);
      EXPECT_LE(r.cell_prefill_ms, r.prefill_ms * (1 + 1e-12));  // a share of the unit's prefill
      EXPECT_GT(r.cell_evict_ms, 0.0);
      EXPECT_GT(r.cell_feed_ms, 0.0);
      EXPECT_GT(r.cell_decode_ms, 0.0);
      EXPECT_LE(r.cell_feed_ms + r.cell_decode_ms, r.decode_ms * (1 + 1e-12));
      EXPECT_EQ(std::isnan(r.cell_select_ms), r.method == "full");
      EXPECT_TRUE(std::isnan(r.cell_extra_pass_ms));
      EXPECT_NE(r.shared_costs & records::kSharedPrefill, 0u);
      EXPECT_GT(r.peak_kv_bytes, r.kept_bytes);
      EXPECT_EQ(r.device, records::ComputeDevice::cpu);
      EXPECT_GT(r.threads, 0);
      std::cout << "  " << records::enum_name(r.attention_backend) << " "
                << records::enum_name(r.protocol) << " " << r.method << ": score " << r.score
                << ", kept " << r.realised_retention << ", " << r.n_generated_tokens
                << " tokens: \"" << r.output << "\"\n";
    }
  }
  expect_plausible_full_kv_answers(records_);
}

TEST(UnitExecutorTest, ExecutingAUnitAgainGivesIdenticalNonTimingFields) {
  if (!fs::exists(kGguf)) {
    GTEST_SKIP() << "the default model " << kGguf << " is absent (tools/setup.sh fetches it)";
  }
  const fs::path dir = test_dir("determinism");
  const Study study(ruler_manifest(kGguf), dir / "study.toml");
  const manifest::Unit& unit = study.expansion.units[0];
  const auto& cells = study.cells_of[0];
  UnitExecutor first(study.manifest, study.expansion, options_for(3, 2));
  const auto reference = first.execute(unit, cells);
  ASSERT_EQ(reference.size(), cells.size());

  // Again on the same executor (model, generator and methods cached): the odd cells, reversed
  // (a resumed unit runs a subset, so the batch composition changes too).
  std::vector<std::size_t> odd, even;
  for (std::size_t i = 0; i < cells.size(); ++i) (i % 2 ? odd : even).push_back(i);
  std::reverse(odd.begin(), odd.end());
  std::vector<const manifest::Cell*> subset;
  for (std::size_t i : odd) subset.push_back(cells[i]);
  const auto again = first.execute(unit, subset);
  ASSERT_EQ(again.size(), odd.size());
  for (std::size_t k = 0; k < odd.size(); ++k) expect_same_non_timing(again[k], reference[odd[k]]);

  // A fresh executor: the even cells.
  UnitExecutor fresh(study.manifest, study.expansion, options_for(3, 2));
  subset.clear();
  for (std::size_t i : even) subset.push_back(cells[i]);
  const auto other = fresh.execute(unit, subset);
  ASSERT_EQ(other.size(), even.size());
  for (std::size_t k = 0; k < even.size(); ++k) {
    expect_same_non_timing(other[k], reference[even[k]]);
  }
}

TEST(UnitExecutorTest, InstanceOverTheConfiguredContextIsExcluded) {
  if (!fs::exists(kGguf)) {
    GTEST_SKIP() << "the default model " << kGguf << " is absent (tools/setup.sh fetches it)";
  }
  const fs::path dir = test_dir("excluded");
  const Study study(ruler_manifest(kGguf), dir / "study.toml");
  UnitExecutor executor(study.manifest, study.expansion, options_for(0, 1, 300));
  const auto records = executor.execute(study.expansion.units[0], study.cells_of[0]);
  ASSERT_EQ(records.size(), 10u);
  for (const CellRecord& r : records) {
    EXPECT_EQ(r.status, CellStatus::excluded);
    EXPECT_NE(r.error.find("configured 300"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("max_new_tokens 128"), std::string::npos) << r.error;
    EXPECT_TRUE(std::isnan(r.score));
    EXPECT_GT(r.n_prompt_tokens, 300u - 128u);  // the reason for the exclusion
    EXPECT_EQ(r.n_generated_tokens, 0u);
    EXPECT_EQ(r.output, "");
    EXPECT_GE(r.t_end_ns, r.t_start_ns);
  }
  std::cout << "excluded: " << records[0].error << "\n";
}

// The cross-tokenizer pitfall: sized with SmolLM2's tokenizer WITHOUT the chat template (tokenizer
// A), evaluated with it and chatml (B): the template's system turn and role markers push the
// instance over the nominal length, so every cell is excluded (as `kvaudit plan` reports it).
TEST(UnitExecutorTest, InstanceSizedWithAnotherTokenizerIsExcluded) {
  if (!fs::exists(kGguf)) {
    GTEST_SKIP() << "the default model " << kGguf << " is absent (tools/setup.sh fetches it)";
  }
  const fs::path dir = test_dir("generation_tokenizer");
  const Study study(ruler_manifest(kGguf, "generation_tokenizer = \"" + kGguf.string() + "\"\n"),
                    dir / "study.toml");
  ASSERT_EQ(study.manifest.benchmarks[0].generation_tokenizer, kGguf.string());
  UnitExecutor executor(study.manifest, study.expansion, {});
  const auto records = executor.execute(study.expansion.units[0], study.cells_of[0]);
  ASSERT_EQ(records.size(), 10u);
  for (const CellRecord& r : records) {
    EXPECT_EQ(r.status, CellStatus::excluded);
    EXPECT_NE(r.error.find("configured 512"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("chat template none"), std::string::npos) << r.error;
    EXPECT_GT(r.n_prompt_tokens + 128u, 512u);
    EXPECT_TRUE(std::isnan(r.score));
  }
  std::cout << "excluded: " << records[0].error << "\n";
}

TEST(UnitExecutorTest, LongBenchRecordIsExecutedAndScored) {
  if (!fs::exists(kGguf)) {
    GTEST_SKIP() << "the default model " << kGguf << " is absent (tools/setup.sh fetches it)";
  }
  const fs::path dir = test_dir("longbench");
  fs::create_directories(dir / "data");
  {
    std::ofstream jsonl(dir / "data" / "hotpotqa.jsonl");
    jsonl
        << R"({"input": "Which city hosts the Ardent Museum?", "context": "Passage 1:\nThe Ardent Museum is a small art museum in Tallinn, Estonia. It opened in 1998.\nPassage 2:\nTallinn is the capital of Estonia.", "answers": ["Tallinn"], "length": 30, "dataset": "hotpotqa", "language": "en", "all_classes": null, "_id": "t1"})"
        << "\n";
  }
  const std::string text = R"([study]
name = "unitexec-longbench"
seed = 1
output_dir = "out"

[[models]]
name = "smollm2"
path = ")" + kGguf.string() +
                           R"("
format = "gguf"
chat_template = "chatml"
dtype = "f32"

[[benchmarks]]
name = "lb"
kind = "longbench"
tasks = ["hotpotqa"]
length = 256
instances = 1
data_dir = "data"

[methods.knorm]

[[grids]]
name = "g"
benchmarks = ["lb"]
methods = ["knorm"]
retention = [0.5]
protocols = ["query-agnostic"]
backends = ["sdpa"]
)";
  const Study study(text, dir / "study.toml");
  ASSERT_EQ(study.expansion.units.size(), 1u);
  UnitExecutor executor(study.manifest, study.expansion, {});
  const auto records = executor.execute(study.expansion.units[0], study.cells_of[0]);
  ASSERT_EQ(records.size(), 2u);  // knorm r=0.5 + full, one protocol
  for (const CellRecord& r : records) {
    ASSERT_EQ(r.status, CellStatus::ok) << r.error;
    EXPECT_EQ(r.task, "hotpotqa");
    EXPECT_EQ(r.nominal_length, 256u);
    EXPECT_LE(r.n_generated_tokens, 32u);  // dataset2maxlen of hotpotqa
    EXPECT_GE(r.score, 0.0);
    EXPECT_LE(r.score, 1.0);
    if (r.method == "knorm") {
      EXPECT_EQ(r.budget_kind, records::BudgetKind::retention);
      EXPECT_EQ(r.retention, 0.5);
      EXPECT_EQ(r.compression, 0.5);
    }
    std::cout << "longbench " << r.method << ": score " << r.score << " output \"" << r.output
              << "\"\n";
  }
}

TEST(UnitExecutorTest, UnreadableModelFailsEveryCellWithItsPath) {
  const fs::path dir = test_dir("unreadable");
  const fs::path model = dir / "broken.gguf";
  {
    std::ofstream out(model, std::ios::binary);
    out << "this is not a GGUF file";
  }
  const Study study(ruler_manifest(model), dir / "study.toml");
  UnitExecutor executor(study.manifest, study.expansion, {});
  for (std::size_t u = 0; u < study.expansion.units.size(); ++u) {
    const auto records = executor.execute(study.expansion.units[u], study.cells_of[u]);
    ASSERT_EQ(records.size(), study.cells_of[u].size());
    for (const CellRecord& r : records) {
      EXPECT_EQ(r.status, CellStatus::error);
      EXPECT_NE(r.error.find(model.string()), std::string::npos) << r.error;
      EXPECT_NE(r.error.find("model smollm2"), std::string::npos) << r.error;
      EXPECT_TRUE(std::isnan(r.score));
      EXPECT_EQ(r.kept_tokens, 0u);
      EXPECT_EQ(r.cell_id, study.cells_of[u][&r - records.data()]->id);
      EXPECT_EQ(r.model, "smollm2");
      EXPECT_EQ(r.task, "niah_single_1");
    }
    if (u == 0) std::cout << "unreadable model: " << records[0].error << "\n";
  }
}

TEST(UnitExecutorTest, EstimatedCostGrowsWithLengthAndCells) {
  const fs::path dir = test_dir("cost");
  Study study(ruler_manifest(kGguf), dir / "study.toml");
  manifest::Unit unit = study.expansion.units[0];
  const double base = UnitExecutor::estimated_cost(study.manifest, unit);
  unit.n_cells *= 2;
  EXPECT_GT(UnitExecutor::estimated_cost(study.manifest, unit), base);
  study.manifest.benchmarks[0].length *= 2;
  EXPECT_GT(UnitExecutor::estimated_cost(study.manifest, unit), base);
  EXPECT_GT(base, 0.0);
}

}  // namespace
}  // namespace kvaudit::run

// The study manifest as kvaudit understands it after parsing and validation (docs/MANIFEST.md).
// Every list that is a set (tasks, ratios, protocols, ...) is stored sorted and without duplicates;
// method parameters are stored with their defaults filled in, so two manifests that mean the same
// study have equal Manifest values and equal canonical forms (canonical.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/attention_backend.h"
#include "base/protocol.h"
#include "methods/catalog.h"
#include "suite/benchmarks/task_catalog.h"

namespace kvaudit::manifest {

// Where a value came from in the manifest file (1-based; 0 when unknown).
struct SourcePos {
  int line = 0;
  int column = 0;
};

struct Study {
  std::string name;
  std::uint64_t seed = 0;
  std::string output_dir;   // as written; relative paths are relative to the manifest's directory
  std::string description;  // free text, not part of the hash
  SourcePos pos;
};

struct Model {
  std::string name;
  std::string path;           // as written
  std::string format;         // "hf" | "gguf"
  std::string chat_template;  // llama3 | qwen2 | mistral | deepseek-r1-distill | chatml | none
  std::string dtype;          // bf16 | f16 | f32
  SourcePos pos;
  SourcePos path_pos;
  SourcePos dtype_pos;  // where dtype was written (the table's position when it was not)
};

struct Benchmark {
  std::string name;
  benchmarks::BenchmarkKind kind = benchmarks::BenchmarkKind::ruler;
  std::vector<std::string> tasks;  // sorted
  std::int64_t length = 0;         // ruler: nominal context tokens; longbench: max prompt tokens
  std::int64_t instances = 0;      // per task
  std::string essay;               // ruler: "builtin" or a text file
  std::string squad;               // ruler: SQuAD v2 dev JSON (needed by qa_1)
  std::string hotpotqa;            // ruler: HotpotQA dev-distractor JSON (needed by qa_2)
  std::string data_dir;            // longbench: directory of <task>.jsonl
  // ruler: reproduce the cross-tokenizer pitfall: size the data with this tokenizer (an HF model
  // directory, tokenizer.json, tokenizer.model or .gguf; no chat template) instead of each
  // evaluated model's own; "" = the model's own. Plan then reports the overflow per task.
  std::string generation_tokenizer;
  SourcePos pos;
  std::map<std::string, SourcePos> path_pos;  // field -> where its path was written
};

struct MethodConfig {
  std::string name;                                   // the manifest's name for this configuration
  std::string method;                                 // catalogue id
  std::string variant;                                // "" when the method has no variants
  std::map<std::string, methods::ParamValue> params;  // every parameter, defaults filled in
  SourcePos pos;
  std::map<std::string, SourcePos> param_pos;  // where each written parameter's value is
};

enum class RatioKind { compression, retention };

// A grid's decode-time compression (docs/MANIFEST.md §decoding; kvpress 0.5.5 DecodingPress, and
// with a prefill method PrefillDecodingPress): every cell of the grid also compresses its cache
// while decoding — every `compression_interval` decode steps, `method`'s selection over the whole
// cache keeps `target_size` entries per (layer, KV head). Absent: no decode-time compression.
// With `target_compression_ratio` r instead of target_size (kvpress CompressionRatioDecodingPress)
// the target of each step is max(1, int(T·(1 − r))), T = the tokens seen so far.
struct GridDecoding {
  std::string method;  // a method configuration name (its selection runs during decoding)
  std::int64_t compression_interval = 512;
  std::int64_t target_size = 2048;
  std::int64_t hidden_states_buffer_size = 256;
  std::string query_positions = "current_step";  // one of kDecodingQueryPositions
  // CAM (kvpress CAMPress; runners/unit/cam_merging.h): evicted values merged into up to this
  // many kept neighbours (≥ 1); absent: plain DecodingPress (and the grid's hashes unchanged).
  std::optional<std::int64_t> merge_budget;
  // kvpress CompressionRatioDecodingPress: 0 ≤ r < 1, given instead of target_size (which then
  // keeps its default and is not used); absent: a fixed target_size (and the grid's hashes
  // unchanged).
  std::optional<double> target_compression_ratio = std::nullopt;
  SourcePos pos;
};
inline constexpr const char* kDecodingQueryPositions[] = {"current_step", "own"};

struct Grid {
  std::string name;
  std::vector<std::string> benchmarks;   // sorted
  std::vector<std::string> models;       // sorted; all models when the manifest omits the key
  std::vector<std::string> methods;      // sorted method config names
  std::optional<RatioKind> ratio_kind;   // set when the grid has ratio methods
  std::vector<double> ratios;            // sorted ascending
  std::vector<double> thresholds;        // sorted ascending (threshold methods)
  std::vector<std::string> protocols;    // sorted: "query-agnostic", "query-aware", "reuse"
  std::vector<std::string> backends;     // sorted: "eager", "sdpa"
  std::optional<GridDecoding> decoding;  // decode-time compression of every cell of the grid
  SourcePos pos;
};

struct Certification {
  std::string name;
  std::string grid;
  std::string benchmark;
  std::string method;  // a method config name in the grid
  std::string protocol;
  std::string backend;
  std::vector<double> candidates;  // in the preregistered test order, conservative -> aggressive
  double tau = 0;
  double epsilon = 0;
  double delta = 0;
  std::int64_t calibration = 0;  // instances per task
  std::int64_t test = 0;         // instances per task
  // The contract's kind (docs/MANIFEST.md §[[certification]]). The defaults are the original
  // contract (one violation risk, fixed sequence, aggregate over the tasks) and are left out of
  // the canonical form, so a manifest without these keys keeps its hash.
  std::vector<std::string> risks = {
      "violation"};         // certified jointly; in kCertificationRisks order
  std::string bound{};      // mean-loss bound (kLossBounds); "" when mean_loss is not a risk
  double loss_epsilon = 0;  // level of the mean loss (= epsilon unless both risks are certified)
  std::string procedure = "fixed_sequence";  // kCertificationProcedures
  std::int64_t starts = 0;  // start points of fixed_sequence_multistart; 0 otherwise
  bool per_task = false;    // every task's risk ≤ its level (intersection–union over the tasks)
  bool sequential = false;  // anytime-valid sequential calibration
  SourcePos pos;

  bool has_risk(const std::string& risk) const {
    for (const auto& r : risks)
      if (r == risk) return true;
    return false;
  }
  // True when every contract-kind field has its default (the original contract).
  bool default_contract() const {
    return risks == std::vector<std::string>{"violation"} && procedure == "fixed_sequence" &&
           !per_task && !sequential;
  }
};

struct Family {
  std::string name;
  std::string analysis;           // accuracy | protocol_gap | baseline_wins | backend_confound |
                                  // certification_task_risk
  std::vector<std::string> over;  // sorted dimensions
  SourcePos pos;
};

struct Statistics {
  std::int64_t bootstrap_resamples = 50000;
  std::uint64_t seed = 0;  // defaults to the study seed
  double alpha = 0.05;     // family-wise error rate of each Bonferroni family
  std::vector<Family> families;
};

// Operational hints: tune them per cluster; they are not part of the hash.
struct Sharding {
  std::int64_t flush_every = 64;       // records between HDF5 flushes
  std::int64_t records_per_shard = 0;  // rotate shards after this many records (0: never)
};

struct Manifest {
  std::filesystem::path file;  // as given on the command line
  Study study;
  std::vector<Model> models;                  // sorted by name
  std::vector<Benchmark> benchmarks;          // sorted by name
  std::vector<MethodConfig> methods;          // sorted by name
  std::vector<Grid> grids;                    // sorted by name
  std::vector<Certification> certifications;  // sorted by name
  Statistics statistics;
  Sharding sharding;

  const Model* find_model(const std::string& name) const;
  const Benchmark* find_benchmark(const std::string& name) const;
  const MethodConfig* find_method(const std::string& name) const;
  const Grid* find_grid(const std::string& name) const;
  // A path from the manifest resolved against the manifest's directory.
  std::filesystem::path resolve(const std::string& path) const;
};

// Names of protocols and attention backends as written in manifests: base/protocol.h's and
// base/attention_backend.h's spellings, in their enums' order (checked below).
inline constexpr const char* kProtocolNames[] = {"query-agnostic", "query-aware", "reuse"};
inline constexpr const char* kAttentionBackendNames[] = {"eager", "sdpa"};
static_assert(std::string_view(kProtocolNames[0]) == protocol_name(Protocol::query_agnostic) &&
              std::string_view(kProtocolNames[1]) == protocol_name(Protocol::query_aware) &&
              std::string_view(kProtocolNames[2]) == protocol_name(Protocol::reuse));
static_assert(std::string_view(kAttentionBackendNames[0]) ==
                  attention_backend_name(AttentionBackend::eager) &&
              std::string_view(kAttentionBackendNames[1]) ==
                  attention_backend_name(AttentionBackend::sdpa));
inline constexpr const char* kFormats[] = {"gguf", "hf"};
inline constexpr const char* kChatTemplates[] = {
    "chatml", "deepseek-r1-distill", "llama3", "mistral", "none", "qwen2"};
inline constexpr const char* kDtypes[] = {"bf16", "f16", "f32"};
inline constexpr const char* kAnalyses[] = {"accuracy", "backend_confound", "baseline_wins",
                                            "certification_task_risk", "protocol_gap"};
// Certification contract kinds. kCertificationProcedures spells statistics/multiple_testing.h's
// TestingProcedure names.
inline constexpr const char* kCertificationRisks[] = {"violation", "mean_loss"};
inline constexpr const char* kLossBounds[] = {"hoeffding_bentkus", "wsr"};
inline constexpr const char* kCertificationProcedures[] = {
    "fixed_sequence", "fixed_sequence_multistart", "bonferroni", "holm"};
inline constexpr const char* kDimensions[] = {"backend", "benchmark", "budget", "method",
                                              "model",   "protocol",  "task"};

}  // namespace kvaudit::manifest

// A synthetic study with planted effects, written the way a real one is: a manifest, the
// preregistration lock through the plan code path (load_manifest → expand → summarize →
// write_prereg), and HDF5 shards through ShardWriter, one shard per simulated rank. The reduce
// tests check that `kvaudit reduce` recovers the planted truth.
//
// Utilities (0/1; the "fractional" benchmark averages two such draws), for unit (model, backend,
// task, instance) and latent uniforms v (per model, task, instance; shared by backends and
// protocols) and w_k (per method, model, task, instance; shared by budgets, protocols, backends):
//   U_full            = 1{v < p_full(model, backend)},     p_full = base(model) − shift·[eager]
//   U_k(r, protocol)  = U_full · (1 − 1{w_k < λ_k(r, protocol)}),
//   λ_k(r, protocol)  = clamp(slope_k · r + gap_k · [query-agnostic], 0, 1)   (r = compression)
// so that, exactly in expectation:
//   accuracy          E U_k        = p_full · (1 − λ_k)
//   protocol gap      E Δ_k(r)     = p_full · gap_k                      (λ_aware + gap_k ≤ 1)
//   method − baseline E Δ          = p_full · (λ_baseline − λ_k)
//   backend confound  E Δ_full     = p_full(sdpa) − p_full(eager) = shift
//   certification     P(violation) = p_full · λ_k(r, protocol)           (τ < 1, 0/1 utilities)
// and violations are nested across candidates (the same w_k). Planted methods: snapkv (small
// slope, gap 0.25: the query-aware favourite that collapses without the question), keydiff
// (gap 0: beats the best trivial baseline under both protocols), streaming_llm (the best baseline),
// knorm, random; in the acceptance preset also tova, expected_attention, h2o (observed_attention)
// and adakv(snapkv).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "suite/records/cell_record.h"

namespace kvaudit::reduce::testing {

struct PlantedMethod {
  std::string name;    // configuration name
  std::string method;  // catalogue id
  std::string extra;   // extra TOML lines of its [methods.NAME] table
  double slope = 0;    // λ grows by slope per unit of compression
  double gap = 0;      // extra λ under query-agnostic
};

struct SyntheticConfig {
  std::string name = "synthetic";
  std::uint64_t seed = 11;
  std::vector<std::string> models = {"model-a", "model-b"};
  std::vector<double> base = {0.85, 0.80};  // p_full under sdpa, per model
  double backend_shift = 0.10;              // p_full(sdpa) − p_full(eager)
  std::vector<std::string> tasks = {"cwe",           "fwe",           "niah_multikey_1",
                                    "niah_single_1", "niah_single_2", "vt"};
  std::int64_t instances = 40;  // per task
  std::vector<double> compression = {0.25, 0.5, 0.75};
  std::vector<std::string> backends = {"eager", "sdpa"};
  std::vector<PlantedMethod> methods;  // empty: default_methods()
  // A second benchmark with fractional utilities (mean of two draws); 0 tasks: none.
  std::vector<std::string> fractional_tasks;
  std::int64_t fractional_instances = 0;
  // Backend-confound grid: every method at one compression, query-aware, both backends (the
  // main grid then runs sdpa only). Off: the main grid uses `backends`.
  bool separate_confound_grid = false;
  // Certification blocks on the first benchmark (sdpa, query-agnostic, candidates = compression).
  std::vector<std::string> certified_methods = {"keydiff", "snapkv"};
  double tau = 0.1, epsilon = 0.1, delta = 0.1;
  std::int64_t calibration = 15, test = 15;  // per task
  // Contract kinds per certified method: TOML lines written in its block in place of the
  // "tau = ..." line (write tau yourself when the block keeps the violation risk). None: the
  // original contract, and the manifest is byte for byte what it was before the field existed.
  std::map<std::string, std::string> certification_kind;
  bool declare_families = true;  // declare a protocol_gap and a task-risk family
  std::int64_t bootstrap_resamples = 2000;
  int ranks = 3;  // shards (round-robin over units)
  std::size_t flush_every = 256;
  // Faults: excluded units (tokenizer check) as "model/task/instance", all backends; failed cells
  // (status oom) for a fraction of one method's cells; records to leave out (missing).
  std::set<std::string> excluded_units;
  std::string oom_method;  // "" = none
  double oom_fraction = 0;
  std::string drop_method;  // "" = none: drop the records of this method ...
  std::string drop_model;   // ... on this model (all its cells)
  // Reuse (docs/design/reuse.md): > 0 puts "reuse" beside the grid's protocols, and every reuse
  // cell writes this many records (questions 0…k−1 of its context, n_questions = k). Question 0
  // uses the latent uniforms of the query-agnostic cell of the same instance, so with k = 1 a
  // reuse cell records exactly what its query-agnostic sibling records; question q ≥ 1 reuses
  // them with probability reuse_rho (drawn per model, task, context and question) and draws its
  // own otherwise: a planted context-level correlation of the questions' utilities.
  std::uint32_t reuse_questions = 0;
  double reuse_rho = 0.5;
  // A fault: this method's reuse records claim one question fewer (n_questions = k − 1, question
  // k − 1 left out), contradicting the other cells of their context.
  std::string reuse_short_method;  // "" = none
  // Protocols of the main grid ("query-aware", "query-agnostic" as before; "reuse" is added when
  // reuse_questions > 0).
  std::vector<std::string> protocols = {"query-aware", "query-agnostic"};
  // Also a certification block on the reuse protocol (reduce reports it as not certified).
  bool certify_reuse = false;
  // Schema-5 costs in the records (synthetic_cell_costs); off: every cost unknown, as in records
  // of older shards.
  bool costs = false;
};

// The synthetic costs of a record (cfg.costs): prefill 2 ms, capture 0.5 ms (evicting cells),
// selection 0.1·(method + 1) ms, eviction 0.2 ms, feed 1 ms, decode 1 + 5·retention ms;
// peak_kv_bytes = kept_bytes + 4096; shares: prefill, feed, decode (+ capture); cpu, 4 threads.
void synthetic_cell_costs(records::CellRecord& r, std::int16_t method, double retention);

// The five methods of the small study.
std::vector<PlantedMethod> default_methods();
// cfg.methods, or default_methods() when it is empty.
const std::vector<PlantedMethod>& methods_of(const SyntheticConfig& cfg);
// The acceptance preset (≈185,000 records; see make_synthetic_study.cpp).
SyntheticConfig acceptance_config();

struct SyntheticStudy {
  std::filesystem::path manifest_file;
  std::filesystem::path results_dir;
  std::string manifest_sha256;
  std::size_t records_written = 0;
  std::size_t cells_expected = 0;
};

// Writes <dir>/manifest.toml, placeholder model files, <dir>/results/prereg.json and the shards.
// `dir` must not contain a previous study.
SyntheticStudy write_synthetic_study(const std::filesystem::path& dir, const SyntheticConfig& cfg);

// The manifest text the generator writes.
std::string synthetic_manifest(const SyntheticConfig& cfg);

// Planted truth (see the header comment).
double p_full(const SyntheticConfig& cfg, std::size_t model, const std::string& backend);
double lambda(const PlantedMethod& m, double compression, bool agnostic);
const PlantedMethod& planted(const SyntheticConfig& cfg, const std::string& name);

// The utilities the generator records, recomputed (for exact checks of counts).
double synthetic_full_utility(const SyntheticConfig& cfg, std::size_t model,
                              const std::string& backend, bool fractional, std::uint32_t task,
                              std::int64_t instance);
double synthetic_method_utility(const SyntheticConfig& cfg, std::size_t model,
                                const std::string& backend, bool fractional, std::uint32_t task,
                                std::int64_t instance, std::size_t method, double compression,
                                bool agnostic);
// The utility the generator records for question `question` of reuse context `context`
// (method < 0: the full-KV cell); question 0 equals the query-agnostic utility of the instance.
double synthetic_reuse_utility(const SyntheticConfig& cfg, std::size_t model,
                               const std::string& backend, bool fractional, std::uint32_t task,
                               std::int64_t context, std::uint32_t question, int method,
                               double compression);

}  // namespace kvaudit::reduce::testing

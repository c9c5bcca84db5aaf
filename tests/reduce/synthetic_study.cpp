// Synthetic study writer with planted effects (see synthetic_study.h).
#include "tests/reduce/synthetic_study.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "statistics/rng.h"
#include "suite/manifest/canonical.h"
#include "suite/manifest/expansion.h"
#include "suite/manifest/manifest_parser.h"
#include "suite/manifest/number_format.h"
#include "suite/manifest/plan_summary.h"
#include "suite/manifest/prereg.h"
#include "suite/records/shard_writer.h"

namespace kvaudit::reduce::testing {
namespace {

using manifest::format_number;

constexpr const char* kMainBenchmark = "ruler-syn";
constexpr const char* kFractionalBenchmark = "ruler-frac";

std::string list(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", \"" : "\"") + v[i] + "\"";
  return out + "]";
}

std::string list(const std::vector<double>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + format_number(v[i]);
  return out + "]";
}

bool needs(const std::vector<std::string>& tasks, const char* task) {
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

// A uniform in [0, 1) that is a pure function of (seed, kind, a, task, instance).
double latent(std::uint64_t seed, std::uint32_t kind, std::uint32_t a, std::uint32_t task,
              std::int64_t instance) {
  const auto words = stats::philox_words(seed, static_cast<std::uint32_t>(instance), a,
                                         task | (kind << 24), stats::RandomPurpose::simulation);
  return stats::unit_double(words[0]);
}

double clamp01(double x) { return std::min(1.0, std::max(0.0, x)); }

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

}  // namespace

std::vector<PlantedMethod> default_methods() {
  return {
      {"keydiff", "keydiff", "", 0.10, 0.0},
      {"knorm", "knorm", "", 0.50, 0.0},
      {"random", "random", "", 0.70, 0.0},
      {"snapkv", "snapkv", "", 0.08, 0.25},
      {"streaming_llm", "streaming_llm", "", 0.30, 0.0},
  };
}

SyntheticConfig acceptance_config() {
  SyntheticConfig c;
  c.name = "synthetic-acceptance";
  c.seed = 20250101;
  c.models = {"model-a", "model-b", "model-c"};
  c.base = {0.85, 0.80, 0.70};
  c.tasks = {"cwe",
             "fwe",
             "niah_multikey_1",
             "niah_multikey_2",
             "niah_multikey_3",
             "niah_multiquery",
             "niah_multivalue",
             "niah_single_1",
             "niah_single_2",
             "niah_single_3",
             "qa_1",
             "qa_2",
             "vt"};
  c.instances = 50;
  c.compression = {0.25, 0.5, 0.75, 0.9};
  c.backends = {"eager", "sdpa"};
  c.separate_confound_grid = true;
  c.methods = default_methods();
  c.methods.push_back({"adakv", "adakv", "scorer = \"snapkv\"", 0.06, 0.22});
  c.methods.push_back({"expected_attention", "expected_attention", "", 0.12, 0.05});
  c.methods.push_back({"h2o", "observed_attention", "", 0.20, 0.15});
  c.methods.push_back({"tova", "tova", "", 0.10, 0.12});
  std::sort(c.methods.begin(), c.methods.end(),
            [](const PlantedMethod& a, const PlantedMethod& b) { return a.name < b.name; });
  c.fractional_tasks = {"cwe",           "fwe",           "niah_multikey_1", "niah_multivalue",
                        "niah_single_1", "niah_single_2", "niah_single_3",   "vt"};
  c.fractional_instances = 12;
  c.certified_methods = {"keydiff", "snapkv"};
  c.epsilon = 0.05;
  c.delta = 0.05;
  c.calibration = 20;
  c.test = 20;
  c.bootstrap_resamples = 50000;
  c.ranks = 8;
  c.flush_every = 1024;
  return c;
}

const std::vector<PlantedMethod>& methods_of(const SyntheticConfig& cfg) {
  static const std::vector<PlantedMethod> defaults = default_methods();
  return cfg.methods.empty() ? defaults : cfg.methods;
}

const PlantedMethod& planted(const SyntheticConfig& cfg, const std::string& name) {
  for (const auto& m : methods_of(cfg))
    if (m.name == name) return m;
  throw std::runtime_error("no planted method " + name);
}

double p_full(const SyntheticConfig& cfg, std::size_t model, const std::string& backend) {
  return cfg.base.at(model) - (backend == "eager" ? cfg.backend_shift : 0.0);
}

double lambda(const PlantedMethod& m, double compression, bool agnostic) {
  return clamp01(m.slope * compression + (agnostic ? m.gap : 0.0));
}

double synthetic_full_utility(const SyntheticConfig& cfg, std::size_t model,
                              const std::string& backend, bool fractional, std::uint32_t task,
                              std::int64_t instance) {
  const double p = p_full(cfg, model, backend);
  const auto m32 = static_cast<std::uint32_t>(model);
  const double u1 = latent(cfg.seed, 1, m32, task, instance) < p ? 1.0 : 0.0;
  if (!fractional) return u1;
  const double u2 = latent(cfg.seed, 3, m32, task, instance) < p ? 1.0 : 0.0;
  return (u1 + u2) / 2;
}

double synthetic_method_utility(const SyntheticConfig& cfg, std::size_t model,
                                const std::string& backend, bool fractional, std::uint32_t task,
                                std::int64_t instance, std::size_t method, double compression,
                                bool agnostic) {
  const auto& methods = methods_of(cfg);
  const double lam = lambda(methods.at(method), compression, agnostic);
  const double p = p_full(cfg, model, backend);
  const auto m32 = static_cast<std::uint32_t>(model);
  const auto key = static_cast<std::uint32_t>((model << 8) | method);
  const double full1 = latent(cfg.seed, 1, m32, task, instance) < p ? 1.0 : 0.0;
  const double kept1 = latent(cfg.seed, 2, key, task, instance) < lam ? 0.0 : 1.0;
  if (!fractional) return full1 * kept1;
  const double full2 = latent(cfg.seed, 3, m32, task, instance) < p ? 1.0 : 0.0;
  const double kept2 = latent(cfg.seed, 4, key, task, instance) < lam ? 0.0 : 1.0;
  return (full1 * kept1 + full2 * kept2) / 2;
}

namespace {

// The instance whose latent uniforms question `question` of reuse context `context` uses: the
// context itself (question 0; question q ≥ 1 with probability reuse_rho), else one of its own,
// beyond every real instance index.
std::int64_t reuse_latent_instance(const SyntheticConfig& cfg, std::size_t model,
                                   std::uint32_t task, std::int64_t context,
                                   std::uint32_t question) {
  if (question == 0) return context;
  const auto key = static_cast<std::uint32_t>((model << 8) | question);
  if (latent(cfg.seed, 6, key, task, context) < cfg.reuse_rho) return context;
  return (std::int64_t{1} << 30) + context * 256 + question;
}

}  // namespace

double synthetic_reuse_utility(const SyntheticConfig& cfg, std::size_t model,
                               const std::string& backend, bool fractional, std::uint32_t task,
                               std::int64_t context, std::uint32_t question, int method,
                               double compression) {
  const std::int64_t instance = reuse_latent_instance(cfg, model, task, context, question);
  if (method < 0) return synthetic_full_utility(cfg, model, backend, fractional, task, instance);
  return synthetic_method_utility(cfg, model, backend, fractional, task, instance,
                                  static_cast<std::size_t>(method), compression, true);
}

std::string synthetic_manifest(const SyntheticConfig& cfg) {
  const auto& methods = methods_of(cfg);
  std::ostringstream t;
  t << "# Synthetic study written by tests/reduce/synthetic_study.cpp (planted effects).\n"
    << "[study]\nname = \"" << cfg.name << "\"\nseed = " << cfg.seed
    << "\noutput_dir = \"results\"\n\n";
  for (const auto& m : cfg.models)
    t << "[[models]]\nname = \"" << m << "\"\npath = \"models/" << m
      << ".gguf\"\nformat = \"gguf\"\nchat_template = \"chatml\"\ndtype = \"f32\"\n\n";
  auto benchmark = [&](const char* name, const std::vector<std::string>& tasks,
                       std::int64_t instances) {
    t << "[[benchmarks]]\nname = \"" << name << "\"\nkind = \"ruler\"\ntasks = " << list(tasks)
      << "\nlength = 1024\ninstances = " << instances << "\nessay = \"builtin\"\n";
    if (needs(tasks, "qa_1")) t << "squad = \"data/squad.json\"\n";
    if (needs(tasks, "qa_2")) t << "hotpotqa = \"data/hotpotqa.json\"\n";
    t << "\n";
  };
  benchmark(kMainBenchmark, cfg.tasks, cfg.instances);
  if (!cfg.fractional_tasks.empty())
    benchmark(kFractionalBenchmark, cfg.fractional_tasks, cfg.fractional_instances);
  std::vector<std::string> names;
  for (const auto& m : methods) {
    t << "[methods." << m.name << "]\n";
    if (m.method != m.name) t << "method = \"" << m.method << "\"\n";
    if (!m.extra.empty()) t << m.extra << "\n";
    names.push_back(m.name);
  }
  std::vector<std::string> grid_protocols = cfg.protocols;
  if (cfg.reuse_questions > 0) grid_protocols.push_back("reuse");
  std::vector<std::string> benches{kMainBenchmark};
  if (!cfg.fractional_tasks.empty()) benches.push_back(kFractionalBenchmark);
  t << "\n[[grids]]\nname = \"audit\"\nbenchmarks = " << list(benches)
    << "\nmethods = " << list(names) << "\ncompression = " << list(cfg.compression)
    << "\nprotocols = " << list(grid_protocols) << "\nbackends = "
    << (cfg.separate_confound_grid ? list(std::vector<std::string>{"sdpa"}) : list(cfg.backends))
    << "\n\n";
  if (cfg.separate_confound_grid) {
    const double mid = cfg.compression[cfg.compression.size() / 2];
    t << "[[grids]]\nname = \"confound\"\nbenchmarks = [\"" << kMainBenchmark
      << "\"]\nmethods = " << list(names) << "\ncompression = [" << format_number(mid)
      << "]\nprotocols = [\"query-aware\"]\nbackends = [\"eager\", \"sdpa\"]\n\n";
  }
  for (const auto& method : cfg.certified_methods) {
    const auto kind = cfg.certification_kind.find(method);
    t << "[[certification]]\nname = \"" << method << "-cert\"\ngrid = \"audit\"\nbenchmark = \""
      << kMainBenchmark << "\"\nmethod = \"" << method
      << "\"\nprotocol = \"query-agnostic\"\nbackend = \"sdpa\"\ncandidates = "
      << list(cfg.compression)
      << (kind == cfg.certification_kind.end() ? "\ntau = " + format_number(cfg.tau)
                                               : "\n" + kind->second)
      << "\nepsilon = " << format_number(cfg.epsilon) << "\ndelta = " << format_number(cfg.delta)
      << "\ncalibration = " << cfg.calibration << "\ntest = " << cfg.test << "\n\n";
  }
  if (cfg.certify_reuse && !cfg.certified_methods.empty())
    t << "[[certification]]\nname = \"" << cfg.certified_methods.front()
      << "-reuse-cert\"\ngrid = \"audit\"\nbenchmark = \"" << kMainBenchmark << "\"\nmethod = \""
      << cfg.certified_methods.front()
      << "\"\nprotocol = \"reuse\"\nbackend = \"sdpa\"\ncandidates = " << list(cfg.compression)
      << "\ntau = " << format_number(cfg.tau) << "\nepsilon = " << format_number(cfg.epsilon)
      << "\ndelta = " << format_number(cfg.delta) << "\ncalibration = " << cfg.calibration
      << "\ntest = " << cfg.test << "\n\n";
  t << "[statistics]\nbootstrap_resamples = " << cfg.bootstrap_resamples << "\nalpha = 0.05\n\n";
  if (cfg.declare_families) {
    t << "[[statistics.families]]\nname = \"protocol-gap\"\nanalysis = \"protocol_gap\"\n"
      << "over = [\"model\", \"backend\", \"benchmark\", \"method\", \"budget\"]\n\n";
    if (!cfg.certified_methods.empty())
      t << "[[statistics.families]]\nname = \"task-risk\"\nanalysis = "
           "\"certification_task_risk\"\nover = [\"model\", \"method\", \"task\"]\n\n";
  }
  return t.str();
}

SyntheticStudy write_synthetic_study(const std::filesystem::path& dir, const SyntheticConfig& cfg) {
  SyntheticStudy out;
  const auto& methods = methods_of(cfg);
  out.manifest_file = dir / "manifest.toml";
  if (std::filesystem::exists(out.manifest_file))
    throw std::runtime_error(out.manifest_file.string() + " exists; use a fresh directory");
  write_text(out.manifest_file, synthetic_manifest(cfg));
  for (const auto& m : cfg.models) write_text(dir / "models" / (m + ".gguf"), "");
  write_text(dir / "data" / "squad.json", "{}\n");
  write_text(dir / "data" / "hotpotqa.json", "{}\n");

  // The plan code path.
  const manifest::Manifest m = manifest::load_manifest(out.manifest_file);
  const manifest::Expansion ex = manifest::expand(m);
  const manifest::PlanSummary summary = manifest::summarize(m, ex);
  out.results_dir = std::filesystem::absolute(m.resolve(m.study.output_dir)).lexically_normal();
  manifest::write_prereg(out.results_dir, manifest::make_prereg(m, ex, summary));
  out.manifest_sha256 = summary.manifest_sha256;
  out.cells_expected = ex.cells.size();

  // Per manifest index: planted method index, canonical digest, configuration index in cfg.models.
  std::vector<std::size_t> planted_index(m.methods.size());
  std::vector<std::string> digests(m.methods.size());
  for (std::size_t i = 0; i < m.methods.size(); ++i) {
    for (std::size_t k = 0; k < methods.size(); ++k)
      if (methods[k].name == m.methods[i].name) planted_index[i] = k;
    digests[i] = manifest::params_digest(manifest::canonical_method(m, m.methods[i]));
  }
  const std::string full_digest = manifest::params_digest(manifest::canonical_full_method());
  std::vector<std::size_t> model_index(m.models.size());
  for (std::size_t i = 0; i < m.models.size(); ++i)
    model_index[i] = static_cast<std::size_t>(
        std::find(cfg.models.begin(), cfg.models.end(), m.models[i].name) - cfg.models.begin());
  std::vector<std::uint32_t> task_offset;
  std::uint32_t offset = 0;
  for (const auto& b : m.benchmarks) {
    task_offset.push_back(offset);
    offset += static_cast<std::uint32_t>(b.tasks.size());
  }

  // Cells grouped by unit so that a unit's cells go to one rank, as in a real run.
  std::vector<std::vector<std::size_t>> cells_of_unit(ex.units.size());
  for (std::size_t i = 0; i < ex.cells.size(); ++i) cells_of_unit[ex.cells[i].unit].push_back(i);

  const std::string canonical = manifest::canonical_text(m);
  std::vector<std::unique_ptr<records::ShardWriter>> writers;
  const auto launch_pid = static_cast<std::int64_t>(::getpid());
  for (int r = 0; r < cfg.ranks; ++r) {
    records::ShardWriterOptions o;
    o.directory = out.results_dir / "shards";
    records::fill_process_provenance(o.provenance);
    o.provenance.manifest_sha256 = out.manifest_sha256;
    o.provenance.manifest_path = out.manifest_file.string();
    o.provenance.n_cells_manifest = ex.cells.size();
    o.provenance.study_name = m.study.name;
    o.provenance.rank = r;
    o.provenance.world_size = cfg.ranks;
    o.provenance.global_seed = m.study.seed;
    o.launch_pid = launch_pid;
    o.flush_every = cfg.flush_every;
    o.manifest_canonical = canonical;
    writers.push_back(std::make_unique<records::ShardWriter>(std::move(o)));
  }

  for (std::size_t ui = 0; ui < ex.units.size(); ++ui) {
    const manifest::Unit& u = ex.units[ui];
    const std::size_t model = model_index[u.model];
    const std::string backend(attention_backend_name(u.attention_backend));
    const manifest::Benchmark& b = m.benchmarks[u.benchmark];
    const bool fractional = b.name == kFractionalBenchmark;
    const std::uint32_t task = task_offset[u.benchmark] + u.task;
    const std::string task_name = b.tasks[u.task];
    const bool excluded = cfg.excluded_units.count(m.models[u.model].name + "/" + task_name + "/" +
                                                   std::to_string(u.instance)) > 0;
    records::ShardWriter& w = *writers[ui % writers.size()];
    for (std::size_t ci : cells_of_unit[ui]) {
      const manifest::Cell& c = ex.cells[ci];
      const bool full = c.method < 0;
      const std::string method_name = manifest::cell_method_name(m, c);
      if (!cfg.drop_method.empty() && method_name == cfg.drop_method &&
          m.models[u.model].name == cfg.drop_model)
        continue;
      records::CellRecord r;
      r.cell_id = c.id;
      r.unit_id = u.id;
      r.attempt = 1;
      r.rank = static_cast<std::int32_t>(ui % writers.size());
      r.model = m.models[u.model].name;
      r.benchmark = b.name;
      r.task = task_name;
      r.method = method_name;
      r.method_id = full ? "full" : m.methods[static_cast<std::size_t>(c.method)].method;
      r.params_digest = full ? full_digest : digests[static_cast<std::size_t>(c.method)];
      r.attention_backend = u.attention_backend;
      const bool agnostic = c.protocol == Protocol::query_agnostic;
      r.protocol = c.protocol;
      r.split = static_cast<records::Split>(u.split);
      r.budget_kind = static_cast<records::BudgetKind>(c.budget_kind);
      if (c.budget_kind == manifest::BudgetKind::compression) {
        r.compression = c.budget;
        r.retention = 1 - c.budget;
      }
      r.instance = static_cast<std::uint32_t>(u.instance);
      r.nominal_length = static_cast<std::uint32_t>(b.length);
      r.n_context_tokens = 980;
      r.n_question_tokens = 30;
      r.n_prompt_tokens = 1024;
      r.n_generated_tokens = 12;
      r.full_bytes = 1u << 20;
      const double retention = full ? 1.0 : 1 - c.budget;
      r.kept_bytes = static_cast<std::uint64_t>(retention * static_cast<double>(r.full_bytes));
      r.kept_tokens = r.kept_bytes / 64;
      r.realised_retention = static_cast<double>(r.kept_bytes) / static_cast<double>(r.full_bytes);
      r.t_start_ns = 1'700'000'000'000'000'000 + static_cast<std::int64_t>(ci) * 1000;
      r.t_end_ns = r.t_start_ns + 500;
      r.prefill_ms = 10;
      r.decode_ms = 5;
      if (cfg.costs) synthetic_cell_costs(r, c.method, retention);
      if (excluded) {
        r.status = records::CellStatus::excluded;
        r.error = "tokenizer check: the prompt is 1100 tokens, more than the 1024-token budget";
      } else if (!cfg.oom_method.empty() && method_name == cfg.oom_method &&
                 latent(cfg.seed, 5, static_cast<std::uint32_t>(c.id), task, u.instance) <
                     cfg.oom_fraction) {
        r.status = records::CellStatus::oom;
        r.error = "CUDA out of memory (synthetic)";
      } else {
        r.status = records::CellStatus::ok;
        r.score = full ? synthetic_full_utility(cfg, model, backend, fractional, task, u.instance)
                       : synthetic_method_utility(cfg, model, backend, fractional, task, u.instance,
                                                  planted_index[static_cast<std::size_t>(c.method)],
                                                  c.budget, agnostic);
        r.output = "synthetic answer";
      }
      if (c.protocol != Protocol::reuse) {
        w.append(r);
        ++out.records_written;
        continue;
      }
      r.n_questions = cfg.reuse_questions;
      if (method_name == cfg.reuse_short_method) --r.n_questions;
      for (std::uint32_t q = 0; q < r.n_questions; ++q) {
        r.question = q;
        if (r.status == records::CellStatus::ok)
          r.score = synthetic_reuse_utility(
              cfg, model, backend, fractional, task, u.instance, q,
              full ? -1 : static_cast<int>(planted_index[static_cast<std::size_t>(c.method)]),
              c.budget);
        w.append(r);
        ++out.records_written;
      }
    }
  }
  for (auto& w : writers) w->close_and_publish();
  return out;
}

void synthetic_cell_costs(records::CellRecord& r, std::int16_t method, double retention) {
  const bool full = method < 0;
  r.cell_prefill_ms = 2;
  r.cell_capture_ms = full ? records::kNotApplicable : 0.5;
  r.cell_select_ms = full ? records::kNotApplicable : 0.1 * (method + 1);
  r.cell_evict_ms = 0.2;
  r.cell_feed_ms = 1;
  r.cell_decode_ms = 1 + 5 * retention;
  r.peak_kv_bytes = r.kept_bytes + 4096;
  r.shared_costs = records::kSharedPrefill | records::kSharedFeed | records::kSharedDecode |
                   (full ? 0u : static_cast<std::uint32_t>(records::kSharedCapture));
  r.device = records::ComputeDevice::cpu;
  r.threads = 4;
}

}  // namespace kvaudit::reduce::testing

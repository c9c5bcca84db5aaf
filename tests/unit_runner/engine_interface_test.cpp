// The one fan-out (run_unit) over the engine interface, checked on the CPU with a GPU-like test
// engine: a DelegatingEngine forwards every primitive to a CpuModel but behaves as the CUDA engine
// does where run_unit must adapt — its caches may not be forked concurrently, its memory holds
// only two cells at a time, and its capture has a device fast path (device_selection) for some
// methods. run_unit on it must give exactly what it gives on the CpuModel itself, use the fast
// path where offered, fork on one thread, batch by the engine's limit, and pass the engine's
// capacity error on. The engines' own adapters refuse another engine's caches and captures.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runners/cpu/cpu_model.h"
#include "runners/unit/unit_runner.h"
#include "tests/unit_runner/test_methods.h"
#include "tests/unit_runner/test_support.h"

namespace kvaudit::unit {
namespace {

using testing::load_tiny_model;
using testing::random_tokens;
using testing::TestScore;

struct Counters {
  std::mutex mutex;
  std::set<std::thread::id> fork_threads;
  int forks = 0;
  int fast_paths = 0;
  int capacity_queries = 0;
  std::size_t largest_batch = 0;
};

// A SequenceCache around the CPU engine's own.
class DelegatingCache final : public SequenceCache {
 public:
  DelegatingCache(std::unique_ptr<SequenceCache> inner, Counters& counters)
      : inner_(std::move(inner)), counters_(counters) {}
  SequenceCache& inner() { return *inner_; }
  const SequenceCache& inner_const() const { return *inner_; }
  int num_layers() const override { return inner_->num_layers(); }
  int num_kv_heads() const override { return inner_->num_kv_heads(); }
  std::int64_t original_length() const override { return inner_->original_length(); }
  std::size_t kept_entries() const override { return inner_->kept_entries(); }
  std::size_t kept_bytes() const override { return inner_->kept_bytes(); }
  std::unique_ptr<SequenceCache> fork() const override {
    {
      const std::lock_guard<std::mutex> lock(counters_.mutex);
      counters_.fork_threads.insert(std::this_thread::get_id());
      ++counters_.forks;
    }
    return std::make_unique<DelegatingCache>(inner_->fork(), counters_);
  }
  void truncate(std::int64_t length) override { inner_->truncate(length); }
  void retain(const methods::Selection& selection) override { inner_->retain(selection); }

 private:
  std::unique_ptr<SequenceCache> inner_;
  Counters& counters_;
};

// A capture around the CPU engine's own, with a device fast path for the methods in `fast`: it
// computes their selection from its own views (as the GPU scorers compute theirs from the GPU
// capture), so the fan-out's results must not change.
class DelegatingCapture final : public PrefillCapture {
 public:
  DelegatingCapture(std::unique_ptr<PrefillCapture> inner, std::set<std::string> fast,
                    const model::ModelWeights& weights, std::span<const float> inv_freq,
                    Counters& counters)
      : inner_(std::move(inner)),
        fast_(std::move(fast)),
        weights_(weights),
        inv_freq_(inv_freq),
        counters_(counters) {}
  PrefillCapture& inner() { return *inner_; }
  void set_prefilled(const SequenceCache* cache) { prefilled_ = cache; }
  const CaptureOptions& options() const override { return inner_->options(); }
  bool complete() const override { return inner_->complete(); }
  std::vector<methods::LayerCapture> layers(int boundary, const SequenceCache& prefilled,
                                            const model::ModelWeights& weights,
                                            std::span<const float> inv_freq) const override {
    return inner_->layers(boundary, static_cast<const DelegatingCache&>(prefilled).inner_const(),
                          weights, inv_freq);
  }
  std::optional<methods::Selection> device_selection(const methods::Method& method, int boundary,
                                                     const methods::Budget& budget) override {
    if (!fast_.contains(method.name())) return std::nullopt;
    ++counters_.fast_paths;
    const auto views = inner_->layers(boundary, *prefilled_, weights_, inv_freq_);
    return method.select(views, budget, {});
  }

 private:
  std::unique_ptr<PrefillCapture> inner_;
  std::set<std::string> fast_;
  const model::ModelWeights& weights_;
  std::span<const float> inv_freq_;
  Counters& counters_;
  const SequenceCache* prefilled_ = nullptr;
};

class DelegatingEngine final : public InferenceEngine {
 public:
  DelegatingEngine(cpu::CpuModel& inner, const model::ModelWeights& weights,
                   std::set<std::string> fast, int capacity)
      : inner_(inner), weights_(weights), fast_(std::move(fast)), capacity_(capacity) {}
  Counters counters;

  const model::ModelConfig& config() const override { return inner_.config(); }
  std::span<const float> rope_inv_freq() const override { return inner_.rope_inv_freq(); }
  AttentionBackend attention_backend() const override { return inner_.attention_backend(); }
  Device device() const override { return Device::cuda; }  // pretends, as a GPU engine would
  bool built_from(const model::ModelWeights& weights) const override {
    return inner_.built_from(weights);
  }
  std::unique_ptr<SequenceCache> new_cache(std::int64_t capacity) override {
    return std::make_unique<DelegatingCache>(inner_.new_cache(capacity), counters);
  }
  std::unique_ptr<PrefillCapture> new_capture(CaptureOptions options) override {
    return std::make_unique<DelegatingCapture>(inner_.new_capture(std::move(options)), fast_,
                                               weights_, inner_.rope_inv_freq(), counters);
  }
  LogitMatrix prefill(SequenceCache& cache, std::span<const std::int32_t> tokens, LogitRows rows,
                      PrefillCapture* capture) override {
    auto& own = dynamic_cast<DelegatingCache&>(cache);
    PrefillCapture* inner_capture = nullptr;
    if (capture != nullptr) {
      auto& delegating = dynamic_cast<DelegatingCapture&>(*capture);
      delegating.set_prefilled(&own.inner());
      inner_capture = &delegating.inner();
    }
    return inner_.prefill(own.inner(), tokens, rows, inner_capture);
  }
  std::vector<LogitMatrix> prefill_batch(std::span<SequenceCache* const> caches,
                                         std::span<const std::span<const std::int32_t>> tokens,
                                         LogitRows rows) override {
    note_batch(caches.size());
    const std::vector<SequenceCache*> inner = unwrap(caches);
    return inner_.prefill_batch(inner, tokens, rows);
  }
  LogitMatrix decode_step(std::span<SequenceCache* const> caches,
                          std::span<const std::int32_t> tokens) override {
    note_batch(caches.size());
    const std::vector<SequenceCache*> inner = unwrap(caches);
    return inner_.decode_step(inner, tokens);
  }
  int max_concurrent_cells(const UnitDemand& demand) override {
    ++counters.capacity_queries;
    if (capacity_ < 1) {
      throw EngineCapacityError("GPU memory: the unit does not fit (" +
                                std::to_string(demand.prefill_tokens) + " tokens)");
    }
    return capacity_;
  }
  bool concurrent_cache_ops() const override { return false; }

 private:
  static std::vector<SequenceCache*> unwrap(std::span<SequenceCache* const> caches) {
    std::vector<SequenceCache*> inner;
    for (SequenceCache* c : caches) inner.push_back(&dynamic_cast<DelegatingCache&>(*c).inner());
    return inner;
  }
  void note_batch(std::size_t n) { counters.largest_batch = std::max(counters.largest_batch, n); }

  cpu::CpuModel& inner_;
  const model::ModelWeights& weights_;
  std::set<std::string> fast_;
  int capacity_;
};

struct Grid {
  std::vector<std::unique_ptr<methods::Method>> methods;
  std::vector<CellSpec> cells;
};

Grid make_grid() {
  Grid g;
  g.methods.push_back(testing::make_top_k_method(TestScore::window_attention));
  g.methods.push_back(testing::make_top_k_method(TestScore::column_sums));
  g.methods.push_back(testing::make_keep_alternate_method());
  std::uint64_t key = 1;
  for (Protocol protocol : {Protocol::query_agnostic, Protocol::query_aware}) {
    g.cells.push_back({nullptr, {}, protocol, key++});
    for (const auto& m : g.methods)
      for (double cr : {0.25, 0.75})
        g.cells.push_back({m.get(), {.compression = cr}, protocol, key++});
  }
  return g;
}

UnitTokens tiny_tokens(int vocab) {
  UnitTokens t;
  t.context = random_tokens(60, vocab, 7);
  t.question = random_tokens(12, vocab, 8);
  t.suffix = random_tokens(4, vocab, 9);
  return t;
}

UnitRunOptions options() {
  UnitRunOptions o;
  o.decode.max_new_tokens = 6;
  o.seed = 5;
  o.keep_selections = true;
  return o;
}

TEST(EngineInterface, TheFanOutIsTheSameOnAGpuLikeEngine) {
  const model::ModelWeights weights = load_tiny_model("llama", "bf16");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const Grid grid = make_grid();
  const UnitTokens tokens = tiny_tokens(model.config().vocab_size);
  const std::string fast_name = grid.methods[0]->name();
  DelegatingEngine gpu_like(model, weights, {fast_name}, /*capacity=*/2);

  const UnitResult on_cpu = run_unit(model, weights, tokens, grid.cells, options());
  const UnitResult delegated = run_unit(gpu_like, weights, tokens, grid.cells, options());
  ASSERT_EQ(delegated.cells.size(), on_cpu.cells.size());
  for (std::size_t i = 0; i < on_cpu.cells.size(); ++i) {
    const CellResult& a = on_cpu.cells[i];
    const CellResult& b = delegated.cells[i];
    ASSERT_EQ(a.status, CellStatus::ok) << a.error;
    ASSERT_EQ(b.status, CellStatus::ok) << b.error;
    EXPECT_EQ(a.selection.has_value(), b.selection.has_value()) << i;
    if (a.selection && b.selection) {
      EXPECT_TRUE(a.selection->kept == b.selection->kept) << i;
    }
    EXPECT_EQ(a.kept_entries, b.kept_entries) << i;
    EXPECT_EQ(a.kept_bytes, b.kept_bytes) << i;
    EXPECT_EQ(a.generated, b.generated) << i;
  }
  // The fast path served its method's cells (2 budgets × 2 protocols), the rest ran on the host.
  EXPECT_EQ(gpu_like.counters.fast_paths, 4);
  // One fork per cell, all on the calling thread (the engine forbids concurrent cache ops).
  EXPECT_EQ(gpu_like.counters.forks, static_cast<int>(grid.cells.size()));
  EXPECT_EQ(gpu_like.counters.fork_threads.size(), 1u);
  // The engine was asked once, and no batch exceeded what it holds.
  EXPECT_EQ(gpu_like.counters.capacity_queries, 1);
  EXPECT_EQ(gpu_like.counters.largest_batch, 2u);
}

TEST(EngineInterface, NaiveRouteAgreesOnTheGpuLikeEngine) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::eager);
  const Grid grid = make_grid();
  const UnitTokens tokens = tiny_tokens(model.config().vocab_size);
  DelegatingEngine gpu_like(model, weights, {grid.methods[2]->name()}, 3);
  const UnitResult fan_out = run_unit(gpu_like, weights, tokens, grid.cells, options());
  const UnitResult naive = run_unit_naive(gpu_like, weights, tokens, grid.cells, options());
  for (std::size_t i = 0; i < grid.cells.size(); ++i) {
    EXPECT_EQ(fan_out.cells[i].generated, naive.cells[i].generated) << i;
    ASSERT_EQ(fan_out.cells[i].selection.has_value(), naive.cells[i].selection.has_value());
    if (fan_out.cells[i].selection) {
      EXPECT_TRUE(fan_out.cells[i].selection->kept == naive.cells[i].selection->kept) << i;
    }
  }
}

TEST(EngineInterface, AnEngineThatCannotHoldTheUnitStopsItWithItsReason) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  const Grid grid = make_grid();
  DelegatingEngine full(model, weights, {}, /*capacity=*/0);
  try {
    run_unit(full, weights, tiny_tokens(model.config().vocab_size), grid.cells, options());
    ADD_FAILURE() << "run_unit ran a unit the engine cannot hold";
  } catch (const EngineCapacityError& error) {
    EXPECT_NE(std::string(error.what()).find("GPU memory: "), std::string::npos) << error.what();
  }
  EXPECT_EQ(full.counters.forks, 0);  // refused before anything ran
}

TEST(EngineInterface, EnginesRefuseAnotherEnginesCachesAndCaptures) {
  const model::ModelWeights weights = load_tiny_model("llama", "f32");
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  DelegatingEngine other(model, weights, {}, 2);
  const std::unique_ptr<SequenceCache> foreign = other.new_cache(16);
  const std::vector<std::int32_t> ids = random_tokens(4, model.config().vocab_size, 1);
  InferenceEngine& engine = model;
  try {
    engine.prefill(*foreign, ids, LogitRows::none);
    ADD_FAILURE() << "a foreign cache was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("another engine's cache"), std::string::npos)
        << error.what();
  }
  const std::unique_ptr<SequenceCache> own = engine.new_cache(16);
  const std::unique_ptr<PrefillCapture> foreign_capture =
      other.new_capture({.boundaries = {2}, .window_rows = 1});
  EXPECT_THROW(engine.prefill(*own, ids, LogitRows::none, foreign_capture.get()),
               std::invalid_argument);
  // Through the interface, the CPU cache forks deeply and evicts per head.
  engine.prefill(*own, ids, LogitRows::none);
  const std::unique_ptr<SequenceCache> copy = own->fork();
  copy->truncate(2);
  methods::Selection keep_first;
  keep_first.kept.assign(
      static_cast<std::size_t>(copy->num_layers()),
      std::vector<std::vector<std::int32_t>>(static_cast<std::size_t>(copy->num_kv_heads()), {0}));
  copy->retain(keep_first);
  EXPECT_EQ(copy->kept_entries(),
            static_cast<std::size_t>(copy->num_layers() * copy->num_kv_heads()));
  EXPECT_EQ(own->kept_entries(),
            static_cast<std::size_t>(4 * own->num_layers() * own->num_kv_heads()));
  EXPECT_EQ(copy->original_length(), 2);
  EXPECT_EQ(own->original_length(), 4);
  keep_first.kept.pop_back();
  EXPECT_THROW(copy->retain(keep_first), std::invalid_argument);  // a wrong shape
}

}  // namespace
}  // namespace kvaudit::unit

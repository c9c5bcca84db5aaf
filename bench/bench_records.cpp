// Benchmarks of suite/records: appending + flushing realistic cell records to an HDF5 shard
// (records/s, including create and publish of a 10,000-record shard), and read_study throughput
// over a directory of published shards (records/s).
//
//   build/bench/bench_records --benchmark_counters_tabular=true
// Files go to a fresh directory under $TMPDIR (default /tmp), removed afterwards.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "suite/records/shard_reader.h"
#include "suite/records/shard_writer.h"

namespace {

using kvaudit::records::CellRecord;

constexpr std::int64_t kRecordsPerShard = 10000;

class ScratchDirectory {
 public:
  ScratchDirectory() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/bench_records.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A cell record as the runner produces it: short identifiers, a ~200-byte answer.
CellRecord realistic_record(std::uint64_t i, int rank) {
  CellRecord r;
  r.cell_id = (i + 1) * 0x9E3779B97F4A7C15ULL;
  r.unit_id = i / 24;
  r.attempt = 1;
  r.rank = rank;
  r.status = kvaudit::records::CellStatus::ok;
  r.model = "Llama-3.1-8B-Instruct";
  r.benchmark = "ruler";
  r.task = "niah_multikey_2";
  r.method = "snapkv-w32-k7";
  r.method_id = "snapkv";
  r.params_digest = "3f2a9c0d4e5b6a71";
  r.attention_backend = kvaudit::AttentionBackend::sdpa;
  r.protocol = kvaudit::Protocol::query_agnostic;
  r.budget_kind = kvaudit::records::BudgetKind::compression;
  r.compression = 0.5;
  r.retention = 0.5;
  r.instance = static_cast<std::uint32_t>(i % 500);
  r.nominal_length = 8192;
  r.n_prompt_tokens = 10612;
  r.n_context_tokens = 10480;
  r.n_question_tokens = 96;
  r.n_generated_tokens = 48;
  r.kept_tokens = 5240ULL * 32 * 8;
  r.kept_bytes = r.kept_tokens * 2 * 128 * 2;
  r.full_bytes = r.kept_bytes * 2;
  r.realised_retention = 0.5;
  r.score = 1.0;
  r.t_start_ns = 1700000000000000000LL + static_cast<std::int64_t>(i) * 1000000;
  r.t_end_ns = r.t_start_ns + 850000000;
  r.prefill_ms = 612.5;
  r.decode_ms = 237.25;
  r.output =
      "The special magic numbers for the needle keys mentioned in the provided text are 4817265, "
      "9302114 and 5571930; the remaining keys do not appear anywhere in the document, so no "
      "values can be given for them.";
  return r;
}

kvaudit::records::ShardWriterOptions writer_options(const std::filesystem::path& dir, int rank,
                                                    std::uint32_t seq, std::size_t flush_every) {
  kvaudit::records::ShardWriterOptions options;
  options.directory = dir;
  kvaudit::records::fill_process_provenance(options.provenance);
  options.provenance.manifest_sha256 = std::string(64, 'a');
  options.provenance.rank = rank;
  options.launch_pid = ::getpid();
  options.seq = seq;
  options.flush_every = flush_every;
  return options;
}

// Arg: flush_every.
void BM_AppendFlushPublish(benchmark::State& state) {
  const ScratchDirectory dir;
  const auto flush_every = static_cast<std::size_t>(state.range(0));
  std::vector<CellRecord> records;
  for (std::int64_t i = 0; i < kRecordsPerShard; ++i) {
    records.push_back(realistic_record(static_cast<std::uint64_t>(i), 0));
  }
  std::uint32_t seq = 0;
  for (auto _ : state) {
    kvaudit::records::ShardWriter writer(writer_options(dir.path(), 0, seq++, flush_every));
    for (const CellRecord& record : records) writer.append(record);
    const auto published = writer.close_and_publish();
    state.PauseTiming();
    std::filesystem::remove(published);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * kRecordsPerShard);
}
BENCHMARK(BM_AppendFlushPublish)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond);

// Arg: number of published shards of 10,000 records each.
void BM_ReadStudy(benchmark::State& state) {
  const ScratchDirectory dir;
  const auto n_shards = static_cast<int>(state.range(0));
  for (int rank = 0; rank < n_shards; ++rank) {
    kvaudit::records::ShardWriter writer(writer_options(dir.path(), rank, 0, 256));
    for (std::int64_t i = 0; i < kRecordsPerShard; ++i) {
      writer.append(
          realistic_record(static_cast<std::uint64_t>(rank * kRecordsPerShard + i), rank));
    }
    writer.close_and_publish();
  }
  for (auto _ : state) {
    const auto study = kvaudit::records::read_study(dir.path());
    benchmark::DoNotOptimize(study.records.data());
    if (study.records.size() != static_cast<std::size_t>(n_shards * kRecordsPerShard)) {
      state.SkipWithError("read_study returned the wrong number of records");
    }
  }
  state.SetItemsProcessed(state.iterations() * n_shards * kRecordsPerShard);
}
BENCHMARK(BM_ReadStudy)->Arg(1)->Arg(4)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

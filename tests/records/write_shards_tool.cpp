// Test tool: writes one shard of formula records (tests/records/record_formula.h) with ShardWriter.
//
//   write_shards_tool --dir D [--rank R] [--world-size W] [--records N] [--flush-every K]
//                     [--seq S] [--cell-offset O] [--attempt A] [--pid P] [--hang-after M]
//                     [--manifest-text T] [--launch-id L]
//
// Record i (0 <= i < N) is formula_record(O + i, R, A). Without --hang-after it publishes the
// shard and prints its path. With --hang-after M it appends M records (flushing every K as usual),
// prints "flushed <records on disk>", and sleeps until killed, never publishing: the driver of the
// SIGKILL test kills it. The caller-filled provenance values are fixed (see fill_test_provenance)
// so that check_shards_h5py.py can predict them.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include "suite/common/sha256.h"
#include "suite/records/shard_writer.h"
#include "tests/records/record_formula.h"

namespace {

struct Options {
  std::string dir;
  int rank = 0;
  int world_size = 1;
  std::uint64_t records = 0;
  std::size_t flush_every = 64;
  std::uint32_t seq = 0;
  std::uint64_t cell_offset = 0;
  int attempt = 1;
  std::int64_t pid = ::getpid();
  std::int64_t hang_after = -1;
  std::string manifest_text = "{\"study\":\"records-test\"}\n";
  std::string launch_id = "0a1b2c3d";
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "write_shards_tool: " << problem << "\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--dir") {
      o.dir = value;
    } else if (flag == "--rank") {
      o.rank = std::stoi(value);
    } else if (flag == "--world-size") {
      o.world_size = std::stoi(value);
    } else if (flag == "--records") {
      o.records = std::stoull(value);
    } else if (flag == "--flush-every") {
      o.flush_every = std::stoull(value);
    } else if (flag == "--seq") {
      o.seq = static_cast<std::uint32_t>(std::stoul(value));
    } else if (flag == "--cell-offset") {
      o.cell_offset = std::stoull(value);
    } else if (flag == "--attempt") {
      o.attempt = std::stoi(value);
    } else if (flag == "--pid") {
      o.pid = std::stoll(value);
    } else if (flag == "--hang-after") {
      o.hang_after = std::stoll(value);
    } else if (flag == "--manifest-text") {
      o.manifest_text = value;
    } else if (flag == "--launch-id") {
      o.launch_id = value;
    } else {
      usage("unknown option " + flag);
    }
  }
  if (o.dir.empty()) usage("--dir is required");
  return o;
}

kvaudit::records::ShardProvenance fill_test_provenance(const Options& o) {
  kvaudit::records::ShardProvenance p;
  kvaudit::records::fill_process_provenance(p);
  p.manifest_sha256 = kvaudit::sha256_hex(o.manifest_text);
  p.manifest_path = "manifests/records-test ✓.toml";
  p.n_cells_manifest = 1000000;
  p.study_name = "records-test ✓";
  p.mpi_library_version = "none (records test tool)";
  p.rank = o.rank;
  p.world_size = o.world_size;
  p.local_rank = o.rank % 2;
  p.gpu_name = "Test GPU ✓";
  p.gpu_uuid = "GPU-00000000-0000-0000-0000-000000000000";
  p.driver_version = "550.54.15";
  p.cuda_runtime_version = "12.4";
  p.global_seed = 0xDEADBEEFCAFEF00DULL;
  p.attempt = o.attempt;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    kvaudit::records::ShardWriterOptions writer_options;
    writer_options.directory = o.dir;
    writer_options.provenance = fill_test_provenance(o);
    writer_options.launch_pid = o.pid;
    writer_options.launch_id = o.launch_id;
    writer_options.seq = o.seq;
    writer_options.flush_every = o.flush_every;
    writer_options.manifest_canonical = o.manifest_text;
    kvaudit::records::ShardWriter writer(std::move(writer_options));

    const std::uint64_t n =
        o.hang_after >= 0 ? static_cast<std::uint64_t>(o.hang_after) : o.records;
    for (std::uint64_t i = 0; i < n; ++i) {
      writer.append(
          kvaudit::records::testing::formula_record(o.cell_offset + i, o.rank, o.attempt));
    }
    if (o.hang_after >= 0) {
      std::printf("flushed %llu\n", static_cast<unsigned long long>(writer.n_flushed()));
      std::fflush(stdout);
      for (;;) ::pause();  // until SIGKILL
    }
    std::printf("%s\n", writer.close_and_publish().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "write_shards_tool: " << e.what() << "\n";
    return 1;
  }
}

// ShardWriter: file naming, the .tmp -> publish protocol, the flush policy as seen on disk,
// H5F_ACC_EXCL and link() refusing to replace files, the destructor's no-implicit-publish rule and
// provenance attributes.
#include "suite/records/shard_writer.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "base/errors.h"
#include "suite/common/build_info.h"
#include "suite/records/shard_name.h"
#include "suite/records/shard_reader.h"
#include "tests/records/record_formula.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

using testing::expect_same_record;
using testing::file_bytes;
using testing::formula_record;
using testing::TempDir;
using testing::test_writer_options;
using testing::write_bytes;

// Sets environment variables for one test and restores them afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
      if (value != nullptr) {
        ::setenv(name, value, 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A byte copy of the shard as it is on disk now: what a SIGKILL at this moment would leave.
ShardContents read_disk_snapshot(const ShardWriter& writer, const TempDir& dir,
                                 const std::string& name) {
  const auto copy = dir / name;
  std::filesystem::copy_file(writer.temp_path(), copy);
  return read_shard(copy, ShardReadMode::salvage);
}

TEST(ShardName, CarriesSlurmJobStepRestartAttemptPidLaunchIdRankAndSeq) {
  ScopedEnvironment env{
      {"SLURM_JOB_ID", "987654"}, {"SLURM_STEP_ID", "3"}, {"SLURM_RESTART_COUNT", "2"}};
  EXPECT_EQ(shard_file_name(shard_name_parts_from_environment(4, 4242, "9f3c01ab", 7, 5)),
            "part-987654.3.t2.a4.pid4242.9f3c01ab-r7.s5.h5");
}

// Containers and PID namespaces repeat pids: a relaunch must still get a new name.
TEST(ShardName, SamePidDifferentAttemptOrLaunchIdGivesADifferentName) {
  const auto name = [](int attempt, const std::string& launch) {
    return shard_file_name(shard_name_parts_from_environment(attempt, 1, launch, 0, 0));
  };
  EXPECT_NE(name(1, "00000001"), name(2, "00000001"));
  EXPECT_NE(name(2, "00000001"), name(2, "00000002"));
  const std::string a = make_launch_id(), b = make_launch_id();
  EXPECT_EQ(a.size(), 8U);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b) << "two draws of 32 random bits agreed (p = 2^-32)";
}

TEST(ShardName, OutsideSlurmUsesLocalZeroZeroAndSanitisesOddCharacters) {
  {
    ScopedEnvironment env{
        {"SLURM_JOB_ID", nullptr}, {"SLURM_STEP_ID", nullptr}, {"SLURM_RESTART_COUNT", nullptr}};
    EXPECT_EQ(shard_file_name(shard_name_parts_from_environment(1, 11, "ab/c.d", 0, 0)),
              "part-local.0.t0.a1.pid11.abcd-r0.s0.h5");
  }
  ScopedEnvironment env{
      {"SLURM_JOB_ID", "12/3.4"}, {"SLURM_STEP_ID", "batch"}, {"SLURM_RESTART_COUNT", nullptr}};
  EXPECT_EQ(shard_file_name(shard_name_parts_from_environment(1, 11, "x", 1, 2)),
            "part-12_3_4.batch.t0.a1.pid11.x-r1.s2.h5");
  EXPECT_TRUE(is_published_shard_name("part-12_3_4.batch.t0.pid11-r1.s2.h5"));
  EXPECT_TRUE(is_temp_shard_name("part-12_3_4.batch.t0.pid11-r1.s2.h5.tmp"));
  EXPECT_FALSE(is_published_shard_name("summary.h5"));
  EXPECT_FALSE(is_published_shard_name("part-x.h5.tmp"));
}

TEST(ShardWriter, WritesUnderTempNameAndPublishesUnderFinalName) {
  TempDir dir;
  ShardWriter writer(test_writer_options(dir.path(), 2, 1, 4));
  EXPECT_EQ(writer.final_path().filename().string().substr(0, 5), "part-");
  EXPECT_EQ(writer.temp_path().string(), writer.final_path().string() + ".tmp");
  EXPECT_TRUE(std::filesystem::exists(writer.temp_path()));
  EXPECT_FALSE(std::filesystem::exists(writer.final_path()));
  for (std::uint64_t g = 0; g < 10; ++g) writer.append(formula_record(g, 2, 1));
  const auto published = writer.close_and_publish();
  EXPECT_EQ(published, writer.final_path());
  EXPECT_FALSE(std::filesystem::exists(writer.temp_path()));
  const ShardContents shard = read_shard(published);
  EXPECT_EQ(shard.records.size(), 10U);
  EXPECT_EQ(shard.n_records_attribute, 10U);
  EXPECT_FALSE(writer.is_open());
}

TEST(ShardWriter, FlushedRecordsAreOnDiskBeforeCloseAndTheTailIsNot) {
  TempDir dir;
  ShardWriter writer(test_writer_options(dir.path(), 0, 0, 5));
  // Right after open: provenance and n_records = 0 are already on disk.
  ShardContents snapshot = read_disk_snapshot(writer, dir, "snap0.h5");
  EXPECT_EQ(snapshot.records.size(), 0U);
  EXPECT_EQ(snapshot.provenance.study_name, "unit");
  EXPECT_EQ(snapshot.provenance.t_close_utc, "");

  for (std::uint64_t g = 0; g < 10; ++g) writer.append(formula_record(g, 0, 1));  // 2 x flush_every
  EXPECT_EQ(writer.n_flushed(), 10U);
  EXPECT_EQ(writer.n_buffered(), 0U);
  snapshot = read_disk_snapshot(writer, dir, "snap1.h5");
  ASSERT_EQ(snapshot.records.size(), 10U);
  EXPECT_EQ(snapshot.n_records_attribute, 10U);
  EXPECT_EQ(snapshot.n_rows, 10U);
  for (std::uint64_t g = 0; g < 10; ++g)
    expect_same_record(snapshot.records[g], formula_record(g, 0, 1));
  // The copy is a complete shard: the strict (published) reading accepts it too.
  EXPECT_EQ(read_shard(dir / "snap1.h5").records.size(), 10U);

  for (std::uint64_t g = 10; g < 13; ++g) writer.append(formula_record(g, 0, 1));
  EXPECT_EQ(writer.n_flushed(), 10U);
  EXPECT_EQ(writer.n_buffered(), 3U);
  EXPECT_EQ(read_disk_snapshot(writer, dir, "snap2.h5").records.size(), 10U);

  writer.flush();
  EXPECT_EQ(writer.n_flushed(), 13U);
  EXPECT_EQ(read_disk_snapshot(writer, dir, "snap3.h5").records.size(), 13U);

  for (std::uint64_t g = 13; g < 15; ++g) writer.append(formula_record(g, 0, 1));
  const ShardContents published = read_shard(writer.close_and_publish());
  ASSERT_EQ(published.records.size(), 15U);
  for (std::uint64_t g = 0; g < 15; ++g)
    expect_same_record(published.records[g], formula_record(g, 0, 1));
}

TEST(ShardWriter, ExistingTempNameFailsTheWriterWithoutTouchingTheFile) {
  TempDir dir;
  const auto options = test_writer_options(dir.path(), 0, 0, 4);
  const std::string name = shard_file_name(
      shard_name_parts_from_environment(1, options.launch_pid, options.launch_id, 0, 0));
  const auto temp = dir / (name + ".tmp");
  write_bytes(temp, "precious records of another writer");
  try {
    ShardWriter writer(options);
    FAIL() << "the writer opened over an existing temporary file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(temp.string()), std::string::npos) << e.what();
  }
  EXPECT_EQ(file_bytes(temp), "precious records of another writer");
  EXPECT_FALSE(std::filesystem::exists(dir / name));
}

TEST(ShardWriter, ExistingFinalNameFailsTheWriterAtOpen) {
  TempDir dir;
  const auto options = test_writer_options(dir.path(), 0, 0, 4);
  const auto final_path = dir / shard_file_name(shard_name_parts_from_environment(
                                    1, options.launch_pid, options.launch_id, 0, 0));
  write_bytes(final_path, "published earlier");
  EXPECT_THROW(ShardWriter writer(options), InputError);
  EXPECT_EQ(file_bytes(final_path), "published earlier");
  EXPECT_FALSE(std::filesystem::exists(final_path.string() + ".tmp"));
}

TEST(ShardWriter, PublishRefusesWhenTheFinalNameExistsAndLeavesBothFilesIntact) {
  TempDir dir;
  ShardWriter writer(test_writer_options(dir.path(), 0, 0, 4));
  for (std::uint64_t g = 0; g < 6; ++g) writer.append(formula_record(g, 0, 1));
  write_bytes(writer.final_path(), "appeared meanwhile");
  try {
    writer.close_and_publish();
    FAIL() << "publish replaced an existing file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(writer.final_path().string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos);
  }
  EXPECT_EQ(file_bytes(writer.final_path()), "appeared meanwhile");
  ASSERT_TRUE(std::filesystem::exists(writer.temp_path()));
  const ShardContents kept = read_shard(writer.temp_path());
  EXPECT_EQ(kept.records.size(), 6U);
  EXPECT_NE(kept.provenance.t_close_utc, "");
}

TEST(ShardWriter, DestructorFlushesAndClosesButNeverPublishes) {
  TempDir dir;
  std::filesystem::path temp, final_path;
  {
    ShardWriter writer(test_writer_options(dir.path(), 1, 0, 100));
    for (std::uint64_t g = 0; g < 7; ++g) writer.append(formula_record(g, 1, 1));
    EXPECT_EQ(writer.n_flushed(), 0U);
    temp = writer.temp_path();
    final_path = writer.final_path();
  }
  EXPECT_FALSE(std::filesystem::exists(final_path));
  ASSERT_TRUE(std::filesystem::exists(temp));
  const ShardContents shard = read_shard(temp, ShardReadMode::salvage);
  ASSERT_EQ(shard.records.size(), 7U);
  for (std::uint64_t g = 0; g < 7; ++g)
    expect_same_record(shard.records[g], formula_record(g, 1, 1));
  EXPECT_EQ(shard.provenance.t_close_utc, "") << "t_close_utc marks a clean close only";
}

TEST(ShardWriter, UseAfterPublishIsAnError) {
  TempDir dir;
  ShardWriter writer(test_writer_options(dir.path(), 0, 0, 4));
  writer.append(formula_record(0, 0, 1));
  writer.close_and_publish();
  EXPECT_THROW(writer.append(formula_record(1, 0, 1)), InternalError);
  EXPECT_THROW(writer.flush(), InternalError);
  EXPECT_THROW(writer.close_and_publish(), InternalError);
  EXPECT_EQ(read_shard(writer.final_path()).records.size(), 1U);
}

TEST(Provenance, EveryFieldRoundTripsThroughRootAttributes) {
  TempDir dir;
  auto options = test_writer_options(dir.path(), 5, 0, 4);
  ShardProvenance& p = options.provenance;
  p.manifest_path = "manifests/ä.toml";
  p.n_cells_manifest = 0xFFFFFFFFFFFFFFF0ULL;
  p.study_name = "naïve — 東京 ✓";
  p.mpi_library_version = "Open MPI v4.1.4";
  p.world_size = 8;
  p.local_rank = 1;
  p.cuda_visible_devices = "1";
  p.gpu_name = "NVIDIA H200";
  p.gpu_uuid = "GPU-1234";
  p.driver_version = "550.54.15";
  p.cuda_runtime_version = "12.4";
  p.slurm_job_id = "99";
  p.slurm_step_id = "0";
  p.slurm_array_task_id = "";
  p.slurm_restart_count = "1";
  p.slurm_job_nodelist = "node[01-02]";
  p.global_seed = 0xDEADBEEFCAFEF00DULL;
  p.attempt = 3;
  options.manifest_canonical = "{\"cells\":[1,2,3]}\n";
  ShardWriter writer(options);
  const ShardContents shard = read_shard(writer.close_and_publish());
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  EXPECT_TRUE(std::regex_match(shard.provenance.t_open_utc, iso)) << shard.provenance.t_open_utc;
  EXPECT_TRUE(std::regex_match(shard.provenance.t_close_utc, iso)) << shard.provenance.t_close_utc;
  ShardProvenance want = p;
  want.t_open_utc = shard.provenance.t_open_utc;
  want.t_close_utc = shard.provenance.t_close_utc;
  want.launch_id = options.launch_id;
  EXPECT_EQ(shard.provenance.launch_id, "0a1b2c3d");
  EXPECT_EQ(provenance_items(shard.provenance), provenance_items(want));
  ASSERT_TRUE(shard.manifest_canonical.has_value());
  EXPECT_EQ(*shard.manifest_canonical, "{\"cells\":[1,2,3]}\n");
}

TEST(Provenance, NonUtf8EnvironmentValuesAreStoredAsValidUtf8) {
  TempDir dir;
  auto options = test_writer_options(dir.path(), 0, 0, 4);
  options.provenance.slurm_job_nodelist = "node\xFF[1-2]";
  ShardWriter writer(options);
  const ShardContents shard = read_shard(writer.close_and_publish());
  EXPECT_EQ(shard.provenance.slurm_job_nodelist, "node\uFFFD[1-2]");
}

TEST(Provenance, FillProcessProvenanceTakesBuildHdf5HostAndSlurmEnvironment) {
  ScopedEnvironment env{{"SLURM_JOB_ID", "4711"},           {"SLURM_STEP_ID", "2"},
                        {"SLURM_ARRAY_TASK_ID", nullptr},   {"SLURM_RESTART_COUNT", "1"},
                        {"SLURM_JOB_NODELIST", "gpu[1-4]"}, {"CUDA_VISIBLE_DEVICES", "3"}};
  ShardProvenance p;
  fill_process_provenance(p);
  EXPECT_EQ(p.slurm_job_id, "4711");
  EXPECT_EQ(p.slurm_step_id, "2");
  EXPECT_EQ(p.slurm_array_task_id, "");
  EXPECT_EQ(p.slurm_restart_count, "1");
  EXPECT_EQ(p.slurm_job_nodelist, "gpu[1-4]");
  EXPECT_EQ(p.cuda_visible_devices, "3");
  EXPECT_EQ(p.tool_version, build_info().version);
  EXPECT_EQ(p.git_commit, build_info().git_commit);
  EXPECT_EQ(p.cxx_flags, build_info().cxx_flags);
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  EXPECT_EQ(p.hdf5_version,
            std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release));
  EXPECT_FALSE(p.hostname.empty());
  EXPECT_EQ(p.rng, "philox4x32-10");
  EXPECT_EQ(p.schema_version, 6);
}

}  // namespace
}  // namespace kvaudit::records

// read_shard / read_study: listing, skipping and salvaging temporary shards, duplicates across
// published shards, manifest hash checks, and clear InputErrors for malformed shards.
#include "suite/records/shard_reader.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <vector>

#include "base/errors.h"
#include "suite/common/sha256.h"
#include "suite/records/hdf5_attributes.h"
#include "suite/records/hdf5_handle.h"
#include "suite/records/provenance.h"
#include "suite/records/record_schema.h"
#include "tests/records/record_formula.h"
#include "tests/records/test_support.h"

namespace kvaudit::records {
namespace {

using testing::contains;
using testing::expect_same_record;
using testing::file_bytes;
using testing::formula_record;
using testing::input_error_of;
using testing::leave_crashed_temp_shard;
using testing::publish_formula_shard;
using testing::reseal;
using testing::TempDir;
using testing::write_bytes;

std::set<std::uint64_t> cell_ids_of(const std::vector<CellRecord>& records) {
  std::set<std::uint64_t> ids;
  for (const auto& r : records) ids.insert(r.cell_id);
  return ids;
}

std::set<std::uint64_t> formula_ids(std::uint64_t first, std::uint64_t last) {
  std::set<std::uint64_t> ids;
  for (std::uint64_t g = first; g < last; ++g) ids.insert(formula_record(g, 0, 1).cell_id);
  return ids;
}

TEST(ListShards, SortsPublishedAndTemporaryShardsByNameAndSetsOthersAside) {
  TempDir dir;
  for (const char* name :
       {"part-b.h5", "part-a.h5", "part-c.h5.tmp", "summary.h5", "notes.txt", "part-a.h5.tmp"}) {
    write_bytes(dir / name, "x");
  }
  std::filesystem::create_directory(dir / "part-dir.h5");
  const ShardListing listing = list_shards(dir.path());
  ASSERT_EQ(listing.published.size(), 2U);
  EXPECT_EQ(listing.published[0].filename(), "part-a.h5");
  EXPECT_EQ(listing.published[1].filename(), "part-b.h5");
  ASSERT_EQ(listing.temporary.size(), 2U);
  EXPECT_EQ(listing.temporary[0].filename(), "part-a.h5.tmp");
  EXPECT_EQ(listing.temporary[1].filename(), "part-c.h5.tmp");
  ASSERT_EQ(listing.ignored.size(), 2U);
  EXPECT_EQ(listing.ignored[0].filename(), "notes.txt");
  EXPECT_EQ(listing.ignored[1].filename(), "summary.h5");
}

TEST(ReadStudy, MissingDirectoryIsAnInputError) {
  TempDir dir;
  const std::string message = input_error_of([&] { read_study(dir / "nope"); });
  EXPECT_TRUE(contains(message, (dir / "nope").string())) << message;
}

TEST(ReadStudy, SkipsTemporaryShardsByDefaultAndReportsThem) {
  TempDir dir;
  publish_formula_shard(dir.path(), 0, 0, 0, 20);
  const auto temp = leave_crashed_temp_shard(dir.path(), 1, 0, 100, 130, 8);
  ASSERT_TRUE(std::filesystem::exists(temp));
  const StudyRecords study = read_study(dir.path());
  EXPECT_EQ(study.records.size(), 20U);
  EXPECT_EQ(study.n_from_published, 20U);
  EXPECT_EQ(cell_ids_of(study.records), formula_ids(0, 20));
  ASSERT_EQ(study.temporary.size(), 1U);
  EXPECT_EQ(study.temporary[0].file, temp);
  EXPECT_EQ(study.temporary[0].outcome, TempShardOutcome::skipped);
  EXPECT_EQ(study.temporary[0].n_added, 0U);
  ASSERT_EQ(study.warnings.size(), 1U);
  EXPECT_TRUE(contains(study.warnings[0], temp.string())) << study.warnings[0];
}

TEST(ReadStudy, SalvageAddsOnlyFlushedRecordsOfCellsNoPublishedShardHolds) {
  TempDir dir;
  publish_formula_shard(dir.path(), 0, 0, 0, 20);
  // Cells 10..39 with a flush every 8: 24 records (10..33) reach the disk, 34..39 are lost;
  // 10..19 are already published.
  const auto temp = leave_crashed_temp_shard(dir.path(), 1, 0, 10, 40, 8);
  StudyReadOptions options;
  options.salvage = true;
  const StudyRecords study = read_study(dir.path(), options);
  ASSERT_EQ(study.temporary.size(), 1U);
  const TempShardInfo& info = study.temporary[0];
  EXPECT_EQ(info.outcome, TempShardOutcome::salvaged);
  EXPECT_EQ(info.n_flushed, 24U);
  EXPECT_EQ(info.n_already_present, 10U);
  EXPECT_EQ(info.n_added, 14U);
  EXPECT_EQ(study.n_from_published, 20U);
  ASSERT_EQ(study.records.size(), 34U);
  EXPECT_EQ(cell_ids_of(study.records), formula_ids(0, 34));
  // Published records win: cells 10..19 come from rank 0's shard; salvaged ones are exact.
  for (std::size_t i = 0; i < 20; ++i)
    expect_same_record(study.records[i], formula_record(i, 0, 1));
  for (std::size_t i = 20; i < 34; ++i)
    expect_same_record(study.records[i], formula_record(i, 1, 1));
  EXPECT_TRUE(study.duplicates.empty());
  EXPECT_TRUE(std::any_of(study.warnings.begin(), study.warnings.end(), [&](const auto& w) {
    return contains(w, temp.string()) && contains(w, "salvaged 14");
  }));
}

TEST(ReadStudy, DuplicateCellsAcrossPublishedShardsAreCountedOnceAndReported) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 10);
  const auto b = publish_formula_shard(dir.path(), 1, 0, 5, 15);
  ASSERT_LT(a.filename().string(), b.filename().string());
  const StudyRecords study = read_study(dir.path());
  EXPECT_EQ(study.records.size(), 15U);
  EXPECT_EQ(cell_ids_of(study.records), formula_ids(0, 15));
  ASSERT_EQ(study.duplicates.size(), 5U);
  std::set<std::uint64_t> duplicated;
  for (const auto& d : study.duplicates) {
    duplicated.insert(d.cell_id);
    EXPECT_EQ(d.first_file, a);
    EXPECT_EQ(d.duplicate_file, b);
  }
  EXPECT_EQ(duplicated, formula_ids(5, 10));
  ASSERT_EQ(study.published.size(), 2U);
  EXPECT_EQ(study.published[0].n_duplicates, 0U);
  EXPECT_EQ(study.published[1].n_records, 10U);
  EXPECT_EQ(study.published[1].n_duplicates, 5U);
  // The record kept for a duplicated cell is the one from the shard first in name order (rank 0).
  const auto kept = std::find_if(study.records.begin(), study.records.end(), [](const auto& r) {
    return r.cell_id == formula_record(7, 0, 1).cell_id;
  });
  ASSERT_NE(kept, study.records.end());
  EXPECT_EQ(kept->rank, 0);
}

TEST(ReadStudy, ShardWithAnotherManifestHashIsRejectedNamingShardAndBothHashes) {
  TempDir dir;
  const std::string other_manifest = "{\"study\":\"other\"}\n";
  publish_formula_shard(dir.path(), 0, 0, 0, 4);
  const auto b = publish_formula_shard(dir.path(), 1, 0, 4, 8, other_manifest);
  const std::string message = input_error_of([&] { read_study(dir.path()); });
  EXPECT_TRUE(contains(message, b.string())) << message;
  EXPECT_TRUE(contains(message, sha256_hex(testing::kTestManifest))) << message;
  EXPECT_TRUE(contains(message, sha256_hex(other_manifest))) << message;
}

TEST(ReadStudy, ExpectedManifestHashRejectsEveryOtherHash) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  StudyReadOptions options;
  options.expected_manifest_sha256 = sha256_hex(testing::kTestManifest);
  EXPECT_EQ(read_study(dir.path(), options).records.size(), 4U);
  const std::string wrong = sha256_hex("preregistered elsewhere");
  options.expected_manifest_sha256 = wrong;
  const std::string message = input_error_of([&] { read_study(dir.path(), options); });
  EXPECT_TRUE(contains(message, a.string())) << message;
  EXPECT_TRUE(contains(message, wrong)) << message;
  EXPECT_TRUE(contains(message, sha256_hex(testing::kTestManifest))) << message;
}

TEST(ReadStudy, SalvagedShardWithAnotherManifestHashIsRejected) {
  TempDir dir;
  publish_formula_shard(dir.path(), 0, 0, 0, 4);
  const auto temp = leave_crashed_temp_shard(dir.path(), 1, 0, 4, 12, 4, "{\"other\":1}\n");
  StudyReadOptions options;
  options.salvage = true;
  const std::string message = input_error_of([&] { read_study(dir.path(), options); });
  EXPECT_TRUE(contains(message, temp.string())) << message;
  options.salvage = false;  // not opened, so not checked
  EXPECT_EQ(read_study(dir.path(), options).records.size(), 4U);
}

TEST(ReadStudy, UnreadableTemporaryShardsAreReportedNotFatal) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  // A writer killed while creating its file leaves a superblock whose EOF is past the file's end.
  write_bytes(dir / "part-killed.h5.tmp", file_bytes(a).substr(0, 48));
  write_bytes(dir / "part-zero.h5.tmp", "");
  StudyReadOptions options;
  options.salvage = true;
  const StudyRecords study = read_study(dir.path(), options);
  EXPECT_EQ(study.records.size(), 4U);
  ASSERT_EQ(study.temporary.size(), 2U);
  for (const auto& info : study.temporary) {
    EXPECT_EQ(info.outcome, TempShardOutcome::unreadable) << info.file;
    EXPECT_TRUE(contains(info.message, info.file.string())) << info.message;
  }
  EXPECT_TRUE(contains(study.temporary[0].message, "truncated")) << study.temporary[0].message;
}

// ---- malformed shards ---------------------------------------------------------------------------

// Opens a published shard for editing with the raw C API.
h5::File open_for_edit(const std::filesystem::path& file) {
  h5::quiet_errors();
  return h5::File(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
}

TEST(MalformedShard, MissingRecordsDatasetIsAnInputErrorNamingTheFile) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  {
    const h5::File f = open_for_edit(a);
    ASSERT_TRUE(f.valid());
    ASSERT_GE(H5Ldelete(f.get(), "records", H5P_DEFAULT), 0);
  }
  reseal(a);
  const std::string message = input_error_of([&] { read_shard(a); });
  EXPECT_EQ(message, a.string() + ": dataset /records is missing");
  EXPECT_EQ(input_error_of([&] { read_study(dir.path()); }), message);
}

// Rewrites a published shard as schema 1 wrote it: the same rows, the attention backend's member
// called `backend`, no record digests, no checksum sidecar, and schema_version 1.
void rewrite_as_schema_1(const std::filesystem::path& file) {
  std::filesystem::remove(checksum_path(file));
  const h5::File f = open_for_edit(file);
  ASSERT_TRUE(f.valid());
  const h5::Dataset old_records(H5Dopen2(f.get(), "records", H5P_DEFAULT));
  ASSERT_TRUE(old_records.valid());
  const h5::Dataspace space(H5Dget_space(old_records.get()));
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<RecordPod> rows(static_cast<std::size_t>(n));
  const h5::Datatype v2 = make_record_memory_type(2);
  ASSERT_GE(H5Dread(old_records.get(), v2.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
  ASSERT_GE(H5Ldelete(f.get(), "records", H5P_DEFAULT), 0);
  const h5::Datatype v1 = make_record_memory_type(1);
  const std::array<hsize_t, 1> dims{static_cast<hsize_t>(n)};
  const h5::Dataspace fixed(H5Screate_simple(1, dims.data(), nullptr));
  const h5::Dataset new_records(
      H5Dcreate2(f.get(), "records", v1.get(), fixed.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_TRUE(new_records.valid());
  ASSERT_GE(H5Dwrite(new_records.get(), v1.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
  H5Dvlen_reclaim(v2.get(), space.get(), H5P_DEFAULT, rows.data());
  h5::write_int64_attribute(f.get(), "schema_version", 1, file.string());
}

TEST(SchemaVersions, ShardsOfSchema1AreReadWithTheirOldMemberName) {
  TempDir dir;
  const auto old_shard = publish_formula_shard(dir.path(), 0, 0, 0, 12);
  rewrite_as_schema_1(old_shard);
  const ShardContents contents = read_shard(old_shard);
  EXPECT_EQ(contents.provenance.schema_version, 1);
  ASSERT_EQ(contents.records.size(), 12u);
  for (std::uint64_t g = 0; g < 12; ++g) {
    expect_same_record(contents.records[g], formula_record(g, 0, 1));
  }
  // A study may mix versions; the old shard has no checksum and is read (in a child process
  // first) as a legacy shard, with a warning.
  publish_formula_shard(dir.path(), 1, 0, 12, 20);
  const StudyRecords study = read_study(dir.path());
  EXPECT_EQ(study.records.size(), 20u);
  ASSERT_EQ(study.published.size(), 2u);
  EXPECT_EQ(study.published[0].verification, ShardVerification::legacy);
  EXPECT_EQ(study.published[1].verification, ShardVerification::checksum);
  EXPECT_TRUE(std::any_of(study.warnings.begin(), study.warnings.end(), [](const std::string& w) {
    return contains(w, "written before shards had checksums");
  }));
  // The member of schema 2 is refused in a shard that claims schema 1, and the reverse.
  {
    const h5::File f = open_for_edit(old_shard);
    h5::write_int64_attribute(f.get(), "schema_version", 2, old_shard.string());
  }
  EXPECT_EQ(input_error_of([&] { read_shard(old_shard); }),
            old_shard.string() + ": /records has no member 'attention_backend'");
}

// Writes a shard whose /records compound has `member` replaced by `replacement`.
std::filesystem::path write_shard_with_member_type(const TempDir& dir, const std::string& member,
                                                   hid_t replacement) {
  const auto path = dir / "part-wrong-type.h5";
  const std::string name = path.string();
  h5::quiet_errors();
  const h5::File f(H5Fcreate(name.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT));
  EXPECT_TRUE(f.valid());
  ShardProvenance p;
  write_provenance(f.get(), p, name);
  h5::write_uint64_attribute(f.get(), "n_records", 0, name);
  const h5::Datatype good = make_record_file_type();
  std::size_t size = 0;
  for (const auto& field : record_fields()) {
    const int index = H5Tget_member_index(good.get(), field.name);
    const h5::Datatype original(H5Tget_member_type(good.get(), static_cast<unsigned>(index)));
    size += H5Tget_size(field.name == member ? replacement : original.get());
  }
  const h5::Datatype compound(H5Tcreate(H5T_COMPOUND, size));
  std::size_t offset = 0;
  for (const auto& field : record_fields()) {
    const int index = H5Tget_member_index(good.get(), field.name);
    const h5::Datatype original(H5Tget_member_type(good.get(), static_cast<unsigned>(index)));
    const hid_t type = field.name == member ? replacement : original.get();
    H5Tinsert(compound.get(), field.name, offset, type);
    offset += H5Tget_size(type);
  }
  const std::array<hsize_t, 1> dims{0};
  const h5::Dataspace space(H5Screate_simple(1, dims.data(), nullptr));
  const h5::Dataset d(H5Dcreate2(f.get(), "records", compound.get(), space.get(), H5P_DEFAULT,
                                 H5P_DEFAULT, H5P_DEFAULT));
  EXPECT_TRUE(d.valid());
  return path;
}

TEST(MalformedShard, MemberOfTheWrongTypeIsAnInputErrorNamingFileAndMember) {
  TempDir dir;
  const h5::Datatype text = h5::make_vlen_utf8_type();
  const auto path = write_shard_with_member_type(dir, "score", text.get());
  const std::string message = input_error_of([&] { read_shard(path); });
  EXPECT_EQ(message,
            path.string() + ": /records member 'score' is a string, expected a 64-bit float");
}

TEST(MalformedShard, IntegerOfTheWrongWidthIsAnInputError) {
  TempDir dir;
  const auto path = write_shard_with_member_type(dir, "cell_id", H5T_STD_I32LE);
  const std::string message = input_error_of([&] { read_shard(path); });
  EXPECT_EQ(message, path.string() +
                         ": /records member 'cell_id' is a 32-bit signed integer, "
                         "expected an unsigned 64-bit integer");
}

TEST(MalformedShard, EnumWithOtherMembersIsAnInputError) {
  TempDir dir;
  const h5::Datatype status(H5Tenum_create(H5T_STD_I8LE));
  for (const auto& [name, value] : {std::pair<const char*, std::int8_t>{"OK", 0}, {"OOM", 1}}) {
    H5Tenum_insert(status.get(), name, &value);
  }
  const auto path = write_shard_with_member_type(dir, "status", status.get());
  const std::string message = input_error_of([&] { read_shard(path); });
  EXPECT_TRUE(contains(message, path.string() + ": /records member 'status' CellStatus has 2 "
                                                "members, expected 5"))
      << message;
}

TEST(MalformedShard, UnsupportedSchemaVersionIsAnInputError) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  {
    const h5::File f = open_for_edit(a);
    h5::write_int64_attribute(f.get(), "schema_version", 7, a.string());
  }
  EXPECT_EQ(input_error_of([&] { read_shard(a); }),
            a.string() + ": schema_version 7 is not supported (this build reads versions 1 to 6)");
}

TEST(MalformedShard, MissingOrMistypedProvenanceAttributeIsAnInputError) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  {
    const h5::File f = open_for_edit(a);
    ASSERT_GE(H5Adelete(f.get(), "hostname"), 0);
    ASSERT_GE(H5Adelete(f.get(), "rank"), 0);
    h5::write_string_attribute(f.get(), "rank", "zero", a.string());
  }
  EXPECT_EQ(input_error_of([&] { read_shard(a); }),
            a.string() + ": attribute 'hostname' is missing");
  {
    const h5::File f = open_for_edit(a);
    h5::write_string_attribute(f.get(), "hostname", "h", a.string());
  }
  EXPECT_EQ(input_error_of([&] { read_shard(a); }),
            a.string() + ": attribute 'rank' is not an integer");
}

TEST(MalformedShard, NRecordsDisagreeingWithTheDatasetIsAnInputError) {
  TempDir dir;
  const auto a = publish_formula_shard(dir.path(), 0, 0, 0, 4);
  {
    const h5::File f = open_for_edit(a);
    h5::write_uint64_attribute(f.get(), "n_records", 9, a.string());
  }
  EXPECT_EQ(input_error_of([&] { read_shard(a); }),
            a.string() + ": attribute n_records is 9 but /records has 4 rows");
  // Salvage reading trusts the smaller of the two.
  EXPECT_EQ(read_shard(a, ShardReadMode::salvage).records.size(), 4U);
}

TEST(MalformedShard, NonHdf5FileNamedLikeAShardIsAnInputError) {
  TempDir dir;
  const auto bogus = dir / "part-bogus.h5";
  write_bytes(bogus, "this is not HDF5\n");
  EXPECT_EQ(input_error_of([&] { read_shard(bogus); }), bogus.string() + ": not an HDF5 file");
  // No sidecar: read in a child process first, which reports the same error.
  EXPECT_EQ(input_error_of([&] { read_study(dir.path()); }),
            bogus.string() + ": no checksum file part-bogus.h5.sha256, and " + bogus.string() +
                ": not an HDF5 file");
  EXPECT_EQ(input_error_of([&] { read_shard(dir / "part-absent.h5"); }),
            (dir / "part-absent.h5").string() + ": no such file");
}

}  // namespace
}  // namespace kvaudit::records

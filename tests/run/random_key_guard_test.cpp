// The resume guard of records schema 4 (run/resume.h require_same_random_keys): a study whose
// recorded random cells were keyed by the attention backend (a shard of schema < 4) is not
// finished with this version's backend-free key while random cells are pending.
#include <gtest/gtest.h>

#include <string>

#include "base/errors.h"
#include "suite/run/resume.h"

namespace kvaudit::run {
namespace {

TEST(RandomKeyGuard, RefusesPendingRandomCellsAfterAnOlderShard) {
  ResumeScan scan;
  scan.backend_keyed_random_shard = "part-1.0.t0.a1.pid7.0a1b2c3d-r0.s0.h5";
  try {
    require_same_random_keys(scan, 12, "/study/shards");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("/study/shards/part-1.0.t0.a1.pid7.0a1b2c3d-r0.s0.h5: written by a kvaudit "
                     "before records schema version 4"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("the 12 pending random cell(s)"), std::string::npos) << m;
    EXPECT_NE(m.find("plan it again in a new output directory; nothing was run"), std::string::npos)
        << m;
  }
}

TEST(RandomKeyGuard, LetsAStudyWithoutPendingRandomCellsOrOlderShardsGoOn) {
  ResumeScan scan;
  EXPECT_NO_THROW(require_same_random_keys(scan, 5, "/study/shards"));
  scan.backend_keyed_random_shard = "part-old.h5";
  EXPECT_NO_THROW(require_same_random_keys(scan, 0, "/study/shards"));
}

}  // namespace
}  // namespace kvaudit::run

// Tests of the per-rank progress meter (suite/run/progress.h).
#include "suite/run/progress.h"

#include <gtest/gtest.h>

namespace kvaudit::run {
namespace {

TEST(Progress, FormatsDurations) {
  EXPECT_EQ(format_duration(0), "0:00:00");
  EXPECT_EQ(format_duration(59.9), "0:00:59");
  EXPECT_EQ(format_duration(3 * 3600 + 25 * 60 + 7), "3:25:07");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(Progress, RateAndCostWeightedEta) {
  ProgressMeter meter(1, 3, 4, 40, 100.0);
  EXPECT_LT(meter.eta_seconds(), 0) << "unknown before the first unit";
  meter.unit_done(10, 40.0, 8.0);  // 40 % of the cost in 8 s → 12 s to go
  EXPECT_DOUBLE_EQ(meter.cells_per_second(), 1.25);
  EXPECT_DOUBLE_EQ(meter.eta_seconds(), 12.0);
  EXPECT_EQ(meter.line(),
            "kvaudit run [rank 1/3] units 1/4, cells 10/40, 1.25 cells/s, elapsed 0:00:08, "
            "ETA 0:00:12");
  meter.unit_done(10, 20.0, 12.0);
  meter.unit_done(10, 20.0, 16.0);
  meter.unit_done(10, 20.0, 20.0);
  EXPECT_EQ(meter.units_done(), 4u);
  EXPECT_EQ(meter.cells_done(), 40u);
  EXPECT_DOUBLE_EQ(meter.eta_seconds(), 0.0);
}

}  // namespace
}  // namespace kvaudit::run

// Every method of this part rejects a capture it cannot serve with a std::invalid_argument naming
// the method and what is wrong (too few window rows, L ≤ window, missing column sums, bad budget).
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/defensivekv.h"
#include "methods/h2o.h"
#include "methods/layer_defensivekv.h"
#include "methods/refreekv.h"
#include "tests/methods_extra/capture_builder.h"

namespace kvaudit::methods {
namespace {

using testing::CaptureBuilder;

// Runs `call`, expects std::invalid_argument, and checks its message holds every fragment.
void expect_rejected(const std::function<void()>& call, const std::vector<std::string>& fragments) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning " << fragments.front();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    for (const auto& f : fragments) EXPECT_NE(what.find(f), std::string::npos) << what;
  }
}

// L = 8 with `rows` captured window rows, H = 2, Hkv = 1.
std::vector<LayerCapture> capture(const CaptureBuilder& b) { return {b.view(0, 1)}; }

TEST(CaptureRejection, TooFewWindowRows) {
  const CaptureBuilder b(2, 1, 4, /*L=*/8, /*rows=*/2, 2);
  const auto layers = capture(b);
  expect_rejected([&] { (void)DefensiveKvMethod(3).select(layers, {.compression = 0.5}, {}); },
                  {"defensivekv", "window_rows 2 < window 3"});
  expect_rejected([&] { (void)LayerDefensiveKvMethod(3).select(layers, {.compression = 0.5}, {}); },
                  {"layer_defensivekv", "window_rows 2 < window 3"});
  expect_rejected([&] { (void)ReFreeKvMethod(3).select(layers, {.threshold = 0.01}, {}); },
                  {"refreekv", "window_rows 2 < window 3"});
  // Also at cr = 0, where nothing is scored.
  expect_rejected([&] { (void)DefensiveKvMethod(3).select(layers, {.compression = 0.0}, {}); },
                  {"defensivekv", "window_rows"});
}

TEST(CaptureRejection, LengthNotAboveWindow) {
  const CaptureBuilder b(2, 1, 4, /*L=*/4, /*rows=*/4, 2);
  const auto layers = capture(b);
  expect_rejected([&] { (void)DefensiveKvMethod(4).select(layers, {.compression = 0.5}, {}); },
                  {"defensivekv", "length 4 must be greater than the window 4"});
  expect_rejected([&] { (void)LayerDefensiveKvMethod(4).select(layers, {.compression = 0.5}, {}); },
                  {"layer_defensivekv", "length 4 must be greater than the window 4"});
  expect_rejected([&] { (void)ReFreeKvMethod(4).select(layers, {.threshold = 0.01}, {}); },
                  {"refreekv", "length 4 must be greater than the window 4"});
}

TEST(CaptureRejection, MissingColumnSumsAndOProj) {
  CaptureBuilder b(2, 1, 4, /*L=*/8, /*rows=*/2, 2);
  LayerCapture view = b.view();
  view.column_sums = {};
  view.o_proj = {};
  const std::vector<LayerCapture> layers = {view};
  expect_rejected([&] { (void)H2oMethod(0.5).select(layers, {.compression = 0.5}, {}); },
                  {"h2o", "column_sums"});
  expect_rejected([&] { (void)DefensiveKvMethod(2).select(layers, {.compression = 0.5}, {}); },
                  {"defensivekv", "o_proj"});
}

TEST(CaptureRejection, BadBudgetsAndParameters) {
  const CaptureBuilder b(2, 1, 4, /*L=*/8, /*rows=*/2, 2);
  const auto layers = capture(b);
  expect_rejected([&] { (void)ReFreeKvMethod(2).select(layers, {.threshold = -0.01}, {}); },
                  {"refreekv", "threshold"});
  expect_rejected([&] { (void)DefensiveKvMethod(2).select(layers, {.compression = 1.0}, {}); },
                  {"defensivekv", "compression"});
  expect_rejected([&] { (void)H2oMethod(0.5).select(layers, {.compression = -0.1}, {}); },
                  {"h2o", "compression"});
  expect_rejected([] { H2oMethod(1.5); }, {"h2o", "heavy_fraction"});
  expect_rejected([] { DefensiveKvMethod(0); }, {"defensivekv", "window"});
  expect_rejected([&] { (void)DefensiveKvMethod(2).select({}, {.compression = 0.5}, {}); },
                  {"defensivekv", "no layers"});
}

TEST(CaptureRejection, LayerDefensiveNeedsEveryLayer) {
  const CaptureBuilder b(2, 1, 4, /*L=*/8, /*rows=*/2, 2);
  const std::vector<LayerCapture> layers = {b.view(0, 3)};  // 1 capture of a 3-layer model
  expect_rejected([&] { (void)LayerDefensiveKvMethod(2).select(layers, {.compression = 0.5}, {}); },
                  {"layer_defensivekv", "num_layers is 3"});
}

}  // namespace
}  // namespace kvaudit::methods

// DeviceKvCache (the GPU twin of cpu::KvCache): retain compacts each head to exactly the listed
// positions (K/V moved bit for bit), truncate rewinds, clone is deep, bad lists change nothing.
#include <gtest/gtest.h>

#include <vector>

#include "tests/cuda/gpu_test_support.h"
#include "tests/cuda/model/model_fixtures.h"

namespace kvaudit::cuda::test {
namespace {

struct HeadData {
  std::vector<std::int32_t> positions;
  std::vector<float> keys, values;
};

HeadData download(const DeviceKvCache& cache, int layer, int head) {
  HeadData d;
  cache.download_head(layer, head, d.positions, d.keys, d.values);
  return d;
}

class DeviceKvCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KVAUDIT_REQUIRE_GPU();
    weights_ = &bf16_weights(tiny_models_dir() / "llama" / "bf16");
    model_ = std::make_unique<CudaModel>(*weights_, AttentionBackend::sdpa);
  }
  DeviceKvCache prefilled(int tokens) {
    DeviceKvCache cache = model_->new_sequence(64);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
    for (int i = 0; i < tokens; ++i) ids[static_cast<std::size_t>(i)] = (7 * i + 3) % 300;
    model_->prefill(cache, ids, LogitRows::none);
    return cache;
  }
  const model::ModelWeights* weights_ = nullptr;
  std::unique_ptr<CudaModel> model_;
};

TEST_F(DeviceKvCacheTest, RetainKeepsExactlyTheListedEntriesPerHead) {
  DeviceKvCache cache = prefilled(30);
  const int layers = cache.num_layers(), heads = cache.num_kv_heads(), d = cache.head_dim();
  std::vector<std::vector<HeadData>> before(static_cast<std::size_t>(layers));
  std::vector<std::vector<std::int32_t>> keep;
  for (int l = 0; l < layers; ++l) {
    for (int h = 0; h < heads; ++h) {
      before[static_cast<std::size_t>(l)].push_back(download(cache, l, h));
      std::vector<std::int32_t> k;
      for (int p = 0; p < 30; ++p) {
        if ((p * (l + 2) + h) % 3 != 0 || p == 29) k.push_back(p);  // ragged: differs per head
      }
      keep.push_back(k);
    }
  }
  cache.retain(keep);
  std::size_t expected_entries = 0;
  for (int l = 0; l < layers; ++l) {
    for (int h = 0; h < heads; ++h) {
      const auto& k = keep[static_cast<std::size_t>(l * heads + h)];
      expected_entries += k.size();
      const HeadData after = download(cache, l, h);
      ASSERT_EQ(after.positions, k);
      const HeadData& old = before[static_cast<std::size_t>(l)][static_cast<std::size_t>(h)];
      for (std::size_t j = 0; j < k.size(); ++j) {
        const std::size_t src = static_cast<std::size_t>(k[j]);
        for (int e = 0; e < d; ++e) {
          ASSERT_EQ(after.keys[j * d + e], old.keys[src * d + e]);
          ASSERT_EQ(after.values[j * d + e], old.values[src * d + e]);
        }
      }
    }
  }
  EXPECT_EQ(cache.kept_entries(), expected_entries);
  EXPECT_EQ(cache.original_length(), 30);
}

TEST_F(DeviceKvCacheTest, InvalidKeepListsThrowAndChangeNothing) {
  DeviceKvCache cache = prefilled(12);
  const std::size_t pairs = static_cast<std::size_t>(cache.num_layers() * cache.num_kv_heads());
  std::vector<std::vector<std::int32_t>> keep(pairs, std::vector<std::int32_t>{0, 1, 2});
  keep[1] = {2, 1};
  EXPECT_THROW(cache.retain(keep), std::invalid_argument);
  keep[1] = {0, 40};
  EXPECT_THROW(cache.retain(keep), std::invalid_argument);
  keep.pop_back();
  EXPECT_THROW(cache.retain(keep), std::invalid_argument);
  EXPECT_EQ(cache.kept_entries(), pairs * 12);
  EXPECT_EQ(download(cache, 0, 0).positions.size(), 12u);
}

TEST_F(DeviceKvCacheTest, TruncateRewindsAndCloneIsDeep) {
  DeviceKvCache cache = prefilled(20);
  DeviceKvCache copy = cache.clone();
  const HeadData original = download(cache, 1, 1);
  EXPECT_EQ(download(copy, 1, 1).keys, original.keys);
  copy.truncate(11);
  EXPECT_EQ(copy.original_length(), 11);
  EXPECT_EQ(download(copy, 1, 1).positions.size(), 11u);
  EXPECT_EQ(download(cache, 1, 1).positions.size(), 20u);  // the original is untouched
  // New tokens continue at the truncated length, like cpu::KvCache::truncate.
  const std::vector<std::int32_t> more = {5, 6};
  model_->prefill(copy, more, LogitRows::none);
  const HeadData after = download(copy, 0, 0);
  ASSERT_EQ(after.positions.size(), 13u);
  EXPECT_EQ(after.positions[11], 11);
  EXPECT_EQ(after.positions[12], 12);
  EXPECT_THROW(copy.truncate(14), std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::cuda::test

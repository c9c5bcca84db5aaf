// GPU prefill attention (runners/cuda/attention/prefill_attention.h) against its CPU twins on the
// same bf16-representable inputs and the same (possibly ragged) cache:
//   sdpa  vs cpu::attention_sdpa(key_block = 64, the GPU tile), Rounding::bf16
//   eager vs cpu::attention_eager, Rounding::bf16
// Tolerance (attention_agreement.h): every element within 2 bf16 ulps measured at
// max(|reference|, RMS of its output vector). Why 2: the backends round at the same points and
// differ only in fp32 summation order (tensor cores, cuBLAS, block reductions vs the CPU's SIMD
// order) and in exp/exp2 implementations (a few fp32 ulps); that moves the final [·] rounding by
// at most one bf16 ulp, and the rare [p] (sdpa) or [s] (eager) rounding that lands on the other
// side of a tie moves the fp32 value by far less than one ulp of the output vector's magnitude.
// Eager rounds at exactly the same points, so additionally ≥ 99% of its outputs must be identical.
// Cases: (a) fresh causal prefills T = 1..300; (b) T = 2048, H = 9, Hkv = 3, d = 64 (SmolLM2);
// (c) T = 1024, H = 32, Hkv = 8, d = 128 (Llama-3.1-8B); (d) a 37-row question over a ragged
// evicted past of 500 tokens; (e) d = 16 (tiny test models); eager with a workspace small enough
// to force many chunks. The attended layer is 1 of 2, so layer offsets are exercised too.
#include "runners/cuda/attention/prefill_attention.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "runners/cpu/attention.h"
#include "runners/cpu/kv_cache.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/device_buffer.h"
#include "runners/model/bf16.h"
#include "tests/cuda/attention/attention_agreement.h"
#include "tests/cuda/device_kv_upload.h"
#include "tests/cuda/gpu_test_support.h"

namespace kvaudit::cuda::test {
namespace {

constexpr int kLayers = 2;
constexpr int kLayer = 1;              // the attended layer
constexpr std::size_t kKeyBlock = 64;  // the GPU sdpa key tile
constexpr double kMaxUlps = 2.0;
constexpr double kEagerIdentical = 0.99;

struct Shape {
  int heads;
  int kv_heads;
  int dim;
};

// Deterministic bf16-representable values (SplitMix64).
class Values {
 public:
  explicit Values(std::uint64_t seed) : state_(seed) {}
  float uniform(float low, float high) {
    const double unit = static_cast<double>(next() >> 11) * 0x1.0p-53;
    return model::round_to_bf16(low + static_cast<float>(unit) * (high - low));
  }
  std::vector<float> vector(std::size_t count, float low, float high) {
    std::vector<float> out(count);
    for (float& v : out) v = uniform(low, high);
    return out;
  }
  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

// One attention problem on the CPU side: the cache after the chunk's append, and the chunk's rows.
struct Case {
  Shape shape;
  cpu::KvCache cache;
  std::vector<float> queries;                 // [T, H, d]
  std::vector<std::int32_t> query_positions;  // [T]
  std::size_t rows() const { return query_positions.size(); }
};

// Appends `count` tokens (random keys and values) to every layer and commits them.
void append_tokens(cpu::KvCache& cache, int count, Values& values) {
  const std::size_t width = static_cast<std::size_t>(count) *
                            static_cast<std::size_t>(cache.num_kv_heads()) *
                            static_cast<std::size_t>(cache.head_dim());
  std::vector<std::int32_t> positions(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i)
    positions[static_cast<std::size_t>(i)] = cache.next_position() + i;
  for (int layer = 0; layer < cache.num_layers(); ++layer) {
    const std::vector<float> keys = values.vector(width, -1.0f, 1.0f);
    const std::vector<float> vals = values.vector(width, -1.0f, 1.0f);
    cache.append_layer(layer, positions, keys, vals);
  }
  cache.commit_step(count);
}

void add_queries(Case& c, int rows, std::int32_t first_position, Values& values) {
  c.queries =
      values.vector(static_cast<std::size_t>(rows) * static_cast<std::size_t>(c.shape.heads) *
                        static_cast<std::size_t>(c.shape.dim),
                    -2.0f, 2.0f);
  c.query_positions.resize(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i)
    c.query_positions[static_cast<std::size_t>(i)] = first_position + i;
}

// A fresh causal prefill of T tokens.
Case fresh_case(Shape shape, int rows, std::uint64_t seed) {
  Values values(seed);
  Case c{shape, cpu::KvCache(kLayers, shape.kv_heads, shape.dim, 2), {}, {}};
  append_tokens(c.cache, rows, values);
  add_queries(c, rows, 0, values);
  return c;
}

// `past` tokens, then every (layer, KV head) keeps its own random subset (head 0 of the attended
// layer keeps nothing, the last head keeps everything), then `rows` new tokens.
Case ragged_case(Shape shape, int past, int rows, std::uint64_t seed) {
  Values values(seed);
  Case c{shape, cpu::KvCache(kLayers, shape.kv_heads, shape.dim, 2), {}, {}};
  append_tokens(c.cache, past, values);
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int h = 0; h < shape.kv_heads; ++h) {
      std::vector<std::int32_t> keep;
      const std::uint64_t percent = 10 + 25 * static_cast<std::uint64_t>(h % 4);  // 10..85 %
      for (std::int32_t p = 0; p < past; ++p) {
        const bool kept = (layer == kLayer && h == 0) ? false
                          : (layer == kLayer && h == shape.kv_heads - 1)
                              ? true
                              : values.next() % 100 < percent;
        if (kept) keep.push_back(p);
      }
      c.cache.retain(layer, h, keep);
    }
  }
  const std::int32_t first = c.cache.next_position();
  append_tokens(c.cache, rows, values);
  add_queries(c, rows, first, values);
  return c;
}

enum class Backend { sdpa, eager };

std::vector<float> cpu_attention(const Case& c, Backend backend) {
  std::vector<cpu::KvHeadView> heads;
  for (int h = 0; h < c.shape.kv_heads; ++h) heads.push_back(c.cache.head(kLayer, h));
  cpu::AttentionProblem problem;
  problem.num_heads = c.shape.heads;
  problem.num_kv_heads = c.shape.kv_heads;
  problem.head_dim = c.shape.dim;
  problem.scale = 1.0f / std::sqrt(static_cast<float>(c.shape.dim));
  problem.rounding = cpu::Rounding::bf16;
  problem.queries = c.queries;
  problem.query_positions = c.query_positions;
  problem.kv_heads = heads;
  std::vector<float> out(c.queries.size());
  if (backend == Backend::sdpa) {
    cpu::attention_sdpa(problem, kKeyBlock, out);
  } else {
    cpu::attention_eager(problem, 64, out);
  }
  return out;
}

// A stream and a cuBLAS handle bound to it.
class GpuContext {
 public:
  GpuContext() {
    KVAUDIT_CUDA_CHECK(cudaStreamCreate(&stream_));
    KVAUDIT_CUBLAS_CHECK(cublasCreate(&handle_));
    KVAUDIT_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
  }
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;
  ~GpuContext() {
    cublasDestroy(handle_);
    cudaStreamDestroy(stream_);
  }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t handle() const { return handle_; }

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t handle_ = nullptr;
};

constexpr std::size_t kDefaultWorkspace = std::size_t{64} << 20;

std::vector<float> gpu_attention(const Case& c, Backend backend, GpuContext& gpu,
                                 std::size_t workspace_bytes = kDefaultWorkspace) {
  std::size_t most = 1;
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int h = 0; h < c.shape.kv_heads; ++h) most = std::max(most, c.cache.kept_count(layer, h));
  }
  const DeviceKvCopy kv = upload_kv_cache(c.cache, static_cast<int>(most) + 5);
  const DeviceBuffer<bf16> queries = to_device_bf16(c.queries);
  DeviceBuffer<std::int32_t> positions(c.rows());
  positions.upload(c.query_positions);
  // Outputs start as NaN: an element the kernel never writes fails the comparison.
  const std::vector<float> nan_fill(c.queries.size(), std::nanf(""));
  DeviceBuffer<bf16> out = to_device_bf16(nan_fill);

  PrefillAttentionProblem problem;
  problem.sequence = kv.descriptor;
  problem.layer = kLayer;
  problem.num_heads = c.shape.heads;
  problem.num_kv_heads = c.shape.kv_heads;
  problem.head_dim = c.shape.dim;
  problem.scale = 1.0f / std::sqrt(static_cast<float>(c.shape.dim));
  problem.rows = static_cast<int>(c.rows());
  problem.queries = queries.data();
  problem.query_positions = positions.data();
  problem.kv_lengths = kv.layer_lengths(kLayer);
  problem.first_query_position = c.query_positions.front();
  problem.last_query_position = c.query_positions.back();
  problem.out = out.data();
  if (backend == Backend::sdpa) {
    prefill_attention_sdpa(problem, gpu.stream());
  } else {
    EagerWorkspace workspace(workspace_bytes);
    prefill_attention_eager(problem, workspace, gpu.handle(), gpu.stream());
    KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(gpu.stream()));  // before the workspace is freed
  }
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(gpu.stream()));
  return download_as_float(out);
}

const char* name(Backend backend) { return backend == Backend::sdpa ? "sdpa" : "eager"; }

Agreement compare_case(const Case& c, Backend backend, GpuContext& gpu,
                       std::size_t workspace_bytes = kDefaultWorkspace) {
  const std::vector<float> reference = cpu_attention(c, backend);
  const std::vector<float> result = gpu_attention(c, backend, gpu, workspace_bytes);
  return compare_attention(reference, result, static_cast<std::size_t>(c.shape.dim));
}

void expect_within_tolerance(const std::string& label, Backend backend, const Agreement& a) {
  print_agreement(label, a);
  EXPECT_EQ(a.nonfinite, 0u) << label;
  EXPECT_LE(a.max_ulps, kMaxUlps) << label;
  if (backend == Backend::eager) {
    EXPECT_GE(a.identical_fraction(), kEagerIdentical) << label;
  }
}

std::string shape_label(const char* what, Backend backend, Shape shape, std::size_t rows) {
  return std::string(name(backend)) + " " + what + " H=" + std::to_string(shape.heads) +
         " Hkv=" + std::to_string(shape.kv_heads) + " d=" + std::to_string(shape.dim) +
         " T=" + std::to_string(rows);
}

void check_fresh(Shape shape, int rows, std::uint64_t seed) {
  GpuContext gpu;
  const Case c = fresh_case(shape, rows, seed);
  for (Backend backend : {Backend::sdpa, Backend::eager}) {
    expect_within_tolerance(shape_label("fresh", backend, shape, c.rows()), backend,
                            compare_case(c, backend, gpu));
  }
}

void check_ragged(Shape shape, int past, int rows, std::uint64_t seed) {
  GpuContext gpu;
  const Case c = ragged_case(shape, past, rows, seed);
  std::string kept;
  for (int h = 0; h < shape.kv_heads; ++h)
    kept += " " + std::to_string(c.cache.kept_count(kLayer, h));
  std::printf("[ragged] kept entries per KV head of layer %d:%s\n", kLayer, kept.c_str());
  for (Backend backend : {Backend::sdpa, Backend::eager}) {
    expect_within_tolerance(shape_label("ragged past 500", backend, shape, c.rows()), backend,
                            compare_case(c, backend, gpu));
  }
}

TEST(PrefillAttention, FreshCausalPrefillsOfEveryLengthUpTo300) {
  KVAUDIT_REQUIRE_GPU();
  GpuContext gpu;
  const Shape shape{4, 2, 64};
  for (Backend backend : {Backend::sdpa, Backend::eager}) {
    Agreement total;
    for (int rows = 1; rows <= 300; ++rows) {
      const Case c = fresh_case(shape, rows, 1000 + static_cast<std::uint64_t>(rows));
      const Agreement a = compare_case(c, backend, gpu);
      if (a.nonfinite > 0 || a.max_ulps > kMaxUlps) {
        expect_within_tolerance(shape_label("fresh", backend, shape, c.rows()), backend, a);
      }
      total.merge(a);
    }
    expect_within_tolerance(std::string(name(backend)) + " fresh H=4 Hkv=2 d=64 T=1..300", backend,
                            total);
  }
}

TEST(PrefillAttention, SmolLm2Shape2048Rows) {
  KVAUDIT_REQUIRE_GPU();
  check_fresh({9, 3, 64}, 2048, 2);
}

TEST(PrefillAttention, Llama8bShape1024Rows) {
  KVAUDIT_REQUIRE_GPU();
  check_fresh({32, 8, 128}, 1024, 3);
}

TEST(PrefillAttention, QuestionChunkOverRaggedPastHeadDim128) {
  KVAUDIT_REQUIRE_GPU();
  check_ragged({8, 4, 128}, 500, 37, 4);
}

TEST(PrefillAttention, QuestionChunkOverRaggedPastHeadDim64) {
  KVAUDIT_REQUIRE_GPU();
  check_ragged({9, 3, 64}, 500, 37, 5);
}

TEST(PrefillAttention, TinyHeadDim16) {
  KVAUDIT_REQUIRE_GPU();
  check_fresh({4, 2, 16}, 77, 6);
  check_ragged({4, 2, 16}, 500, 37, 7);
}

TEST(PrefillAttention, EagerSmallWorkspaceChunksRows) {
  KVAUDIT_REQUIRE_GPU();
  GpuContext gpu;
  const Shape shape{6, 2, 64};
  const Case c = ragged_case(shape, 300, 150, 8);
  std::size_t most = 0;
  for (int h = 0; h < shape.kv_heads; ++h) most = std::max(most, c.cache.kept_count(kLayer, h));
  // Room for 7 rows of the group's scores: 22 chunks, the last one partial.
  const std::size_t row_bytes = 3 * ((most + 7) / 8 * 8) * 2;
  expect_within_tolerance(shape_label("7-row chunks", Backend::eager, shape, c.rows()),
                          Backend::eager, compare_case(c, Backend::eager, gpu, 7 * row_bytes));
}

TEST(PrefillAttention, EagerRejectsAWorkspaceBelowOneRow) {
  KVAUDIT_REQUIRE_GPU();
  GpuContext gpu;
  const Case c = fresh_case({4, 2, 64}, 100, 9);
  EXPECT_THROW(gpu_attention(c, Backend::eager, gpu, 64), std::invalid_argument);
}

TEST(PrefillAttention, EagerRejectsAHandleOnAnotherStream) {
  KVAUDIT_REQUIRE_GPU();
  GpuContext gpu;
  GpuContext other;
  const Case c = fresh_case({4, 2, 64}, 10, 10);
  const DeviceKvCopy kv = upload_kv_cache(c.cache, 10);
  const DeviceBuffer<bf16> queries = to_device_bf16(c.queries);
  DeviceBuffer<std::int32_t> positions(c.rows());
  positions.upload(c.query_positions);
  DeviceBuffer<bf16> out(c.queries.size());
  PrefillAttentionProblem problem;
  problem.sequence = kv.descriptor;
  problem.layer = kLayer;
  problem.num_heads = 4;
  problem.num_kv_heads = 2;
  problem.head_dim = 64;
  problem.scale = 0.125f;
  problem.rows = 10;
  problem.queries = queries.data();
  problem.query_positions = positions.data();
  problem.kv_lengths = kv.layer_lengths(kLayer);
  problem.first_query_position = 0;
  problem.last_query_position = 9;
  problem.out = out.data();
  EagerWorkspace workspace(std::size_t{1} << 20);
  EXPECT_THROW(prefill_attention_eager(problem, workspace, other.handle(), gpu.stream()),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvaudit::cuda::test

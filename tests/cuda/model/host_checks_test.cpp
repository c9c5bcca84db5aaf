// Host-side checks of the CUDA engine that need no GPU and always run: the decode-graph cache key
// covers every descriptor field, and a model whose head_dim has no kernel is refused when the
// CudaModel is built, before any weight is uploaded (the constructor throws before touching the
// device, so this runs on a machine without one).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runners/cuda/cuda_model.h"
#include "runners/cuda/decode_graph_key.h"
#include "runners/cuda/gemm.h"
#include "runners/cuda/supported_shapes.h"
#include "runners/model/model_error.h"

namespace kvaudit::cuda::test {
namespace {

template <typename T>
T* fake_pointer(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

DeviceSequenceKv descriptor() {
  DeviceSequenceKv d;
  d.keys = fake_pointer<__nv_bfloat16>(0x10000);
  d.values = fake_pointer<__nv_bfloat16>(0x20000);
  d.positions = fake_pointer<std::int32_t>(0x30000);
  d.lengths = fake_pointer<std::int32_t>(0x40000);
  d.num_kv_heads = 3;
  d.head_dim = 64;
  d.capacity = 512;
  return d;
}

// A new cache that the allocator placed with the same keys and lengths addresses but its values or
// positions elsewhere (or another layout) must not replay a graph captured for the old one.
TEST(DecodeGraphKey, EveryDescriptorFieldIsPartOfTheKey) {
  const DeviceSequenceKv base = descriptor();
  const std::vector<DeviceSequenceKv> one{base};
  const DecodeGraphKey key = decode_graph_key(one);
  const auto changed = [&](auto edit) {
    DeviceSequenceKv d = base;
    edit(d);
    const std::vector<DeviceSequenceKv> batch{d};
    return decode_graph_key(batch);
  };
  EXPECT_NE(key, changed([](DeviceSequenceKv& d) { d.keys += 8; }));
  EXPECT_NE(key, changed([](DeviceSequenceKv& d) { d.values += 8; }));
  EXPECT_NE(key, changed([](DeviceSequenceKv& d) { d.positions += 8; }));
  EXPECT_NE(key, changed([](DeviceSequenceKv& d) { d.lengths += 8; }));
  EXPECT_NE(key, changed([](DeviceSequenceKv& d) { d.num_kv_heads = 6; }));
  EXPECT_NE(key, changed([](DeviceSequenceKv& d) { d.head_dim = 128; }));
  EXPECT_NE(key, changed([](DeviceSequenceKv& d) { d.capacity = 1024; }));
  EXPECT_EQ(key, changed([](DeviceSequenceKv&) {}));
  // The order of the batch matters (row i of the graph is sequence i).
  DeviceSequenceKv other = base;
  other.keys += 4096;
  const std::vector<DeviceSequenceKv> ab{base, other}, ba{other, base};
  EXPECT_NE(decode_graph_key(ab), decode_graph_key(ba));
}

// Split-K partials are summed in fp32 only: a plan with bf16 partial sums (INPLACE, OUTPUT_TYPE)
// is refused, one without split-K (NONE) or with fp32 partials (COMPUTE_TYPE) is taken.
TEST(GemmPlans, OnlyFp32SplitKReductionsAreAllowed) {
  EXPECT_TRUE(reduction_scheme_allowed(CUBLASLT_REDUCTION_SCHEME_NONE));
  EXPECT_TRUE(reduction_scheme_allowed(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  EXPECT_FALSE(reduction_scheme_allowed(CUBLASLT_REDUCTION_SCHEME_INPLACE));
  EXPECT_FALSE(reduction_scheme_allowed(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE));
  EXPECT_EQ(kAllowedReductionSchemes, std::uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});
  GemmAlgorithmConfig config;
  config.id = 21;
  config.split_k = 4;
  config.reduction_scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  EXPECT_EQ(describe(config), "algo 21 tile 0 stages 0 split-k 4 reduction 2 swizzle 0 custom 0");
}

TEST(SupportedShapes, HeadDimsPerBackend) {
  EXPECT_EQ(supported_head_dims_text(AttentionBackend::sdpa), "16, 64, 128");
  EXPECT_EQ(supported_head_dims_text(AttentionBackend::eager), "16, 32, 64, 128, 256");
  for (int d : {16, 64, 128}) {
    EXPECT_TRUE(prefill_supports_head_dim(AttentionBackend::sdpa, d)) << d;
    EXPECT_TRUE(decode_supports_head_dim(d)) << d;
  }
  // Phi-3-mini (96): an eager prefill exists but no decode kernel; Gemma (256): no sdpa prefill.
  EXPECT_FALSE(decode_supports_head_dim(96));
  EXPECT_TRUE(prefill_supports_head_dim(AttentionBackend::eager, 96));
  EXPECT_FALSE(prefill_supports_head_dim(AttentionBackend::sdpa, 256));
  EXPECT_FALSE(prefill_supports_head_dim(AttentionBackend::eager, 24));
}

model::ModelWeights weights_with_head_dim(int head_dim) {
  model::ModelWeights w;
  w.config.num_layers = 2;
  w.config.hidden_size = 32 * head_dim;
  w.config.num_heads = 32;
  w.config.num_kv_heads = 8;
  w.config.head_dim = head_dim;
  w.config.intermediate_size = 64;
  w.config.vocab_size = 100;
  w.source = "phi-like.gguf";
  return w;  // no tensors: the check must come before the upload reads any
}

TEST(SupportedShapes, CudaModelRefusesAnUnsupportedHeadDimBeforeUploading) {
  for (AttentionBackend backend : {AttentionBackend::sdpa, AttentionBackend::eager}) {
    const model::ModelWeights w = weights_with_head_dim(96);
    try {
      CudaModel model(w, backend);
      ADD_FAILURE() << "head_dim 96 was accepted";
    } catch (const model::ModelInputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("head_dim 96"), std::string::npos) << message;
      EXPECT_NE(
          message.find(backend == AttentionBackend::sdpa ? "16, 64, 128" : "16, 32, 64, 128, 256"),
          std::string::npos)
          << message;
      EXPECT_NE(message.find("--device cpu"), std::string::npos) << message;
    }
  }
  // Gemma's 256 runs eager but not sdpa.
  const model::ModelWeights gemma = weights_with_head_dim(256);
  EXPECT_THROW(CudaModel(gemma, AttentionBackend::sdpa), model::ModelInputError);
}

}  // namespace
}  // namespace kvaudit::cuda::test

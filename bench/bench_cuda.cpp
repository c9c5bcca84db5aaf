// CUDA backend timings on one GPU (plain timed program; results go to docs/PERFORMANCE.md):
//   ceilings  device-to-device copy bandwidth (bytes read + written) and the cuBLASLt bf16 GEMM
//             rate at 8192³, measured in the same run as everything else
//   attention the prefill attention kernels alone (sdpa and eager) at 8K and 32K, H=32, Hkv=8,
//             d=128, causal: FLOPs = 2·T(T+1)·d·H (QKᵀ and P·V over the causal triangle)
//   prefill   a random-weight model with Llama-3.1-8B's shapes, 8K and 32K tokens, both backends;
//             FLOPs = 2·T·P_linear + 2·T(T+1)·d·H·L (+ one lm_head row), MFU against the H200's
//             989 TFLOP/s dense bf16 and against the measured GEMM ceiling
//   decode    batched decode steps (CUDA graphs on/off) over 4K-token caches
// Usage: bench_cuda [--quick]   (--quick: 8K only, fewer repetitions)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "runners/cuda/attention/prefill_attention.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/cuda_model.h"
#include "runners/cuda/device_probe.h"
#include "runners/cuda/gemm.h"
#include "runners/cuda/random_fill.h"

namespace kc = kvaudit::cuda;
using kvaudit::AttentionBackend;
using kvaudit::LogitRows;

namespace {

constexpr double kPeakBf16 = 989e12;  // H100/H200 SXM dense bf16 (datasheet)

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct Row {
  std::string what;
  std::string value;
};
std::vector<Row> summary;

void report(const std::string& what, const std::string& value) {
  std::printf("%-58s %s\n", what.c_str(), value.c_str());
  std::fflush(stdout);
  summary.push_back({what, value});
}

std::string format(const char* pattern, double a, double b = 0, double c = 0) {
  char text[256];
  std::snprintf(text, sizeof text, pattern, a, b, c);
  return text;
}

double linear_flops_per_token(const kvaudit::model::ModelConfig& c) {
  const double h = c.hidden_size, q = double(c.num_heads) * c.head_dim,
               kv = double(c.num_kv_heads) * c.head_dim, inter = c.intermediate_size;
  return 2.0 * (h * (q + 2 * kv) + q * h + 3.0 * h * inter) * c.num_layers;
}

double attention_flops(double tokens, const kvaudit::model::ModelConfig& c) {
  return 2.0 * tokens * (tokens + 1) * c.head_dim * c.num_heads * c.num_layers;
}

void copy_ceiling(int repeats) {
  const std::size_t bytes = std::size_t{4} << 30;
  kc::DeviceBuffer<std::uint8_t> a(bytes), b(bytes);
  KVAUDIT_CUDA_CHECK(cudaMemset(a.data(), 1, bytes));
  KVAUDIT_CUDA_CHECK(cudaMemcpy(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));
  cudaEvent_t start, stop;
  KVAUDIT_CUDA_CHECK(cudaEventCreate(&start));
  KVAUDIT_CUDA_CHECK(cudaEventCreate(&stop));
  KVAUDIT_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < repeats; ++i) {
    KVAUDIT_CUDA_CHECK(cudaMemcpy(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));
  }
  KVAUDIT_CUDA_CHECK(cudaEventRecord(stop));
  KVAUDIT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  KVAUDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  const double rate = 2.0 * double(bytes) * repeats / (ms / 1e3);
  report("ceiling: D2D copy 4 GiB (read+write)", format("%.0f GB/s", rate / 1e9));
}

double gemm_rate(kc::Gemm& gemm, int rows, int in, int out, int repeats) {
  kc::DeviceBuffer<kc::bf16> x(std::size_t(rows) * in), w(std::size_t(out) * in),
      y(std::size_t(rows) * out);
  kc::fill_random_bf16(x.data(), x.size(), 1, 1.0f, 0.0f, nullptr);
  kc::fill_random_bf16(w.data(), w.size(), 2, 0.02f, 0.0f, nullptr);
  gemm.linear(x.data(), rows, in, w.data(), out, nullptr, y.data(), nullptr);
  gemm.linear(x.data(), rows, in, w.data(), out, nullptr, y.data(), nullptr);
  cudaEvent_t start, stop;
  KVAUDIT_CUDA_CHECK(cudaEventCreate(&start));
  KVAUDIT_CUDA_CHECK(cudaEventCreate(&stop));
  KVAUDIT_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < repeats; ++i) {
    gemm.linear(x.data(), rows, in, w.data(), out, nullptr, y.data(), nullptr);
  }
  KVAUDIT_CUDA_CHECK(cudaEventRecord(stop));
  KVAUDIT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  KVAUDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  return 2.0 * rows * double(in) * out * repeats / (ms / 1e3);
}

// The attention kernels alone on one layer's worth of a causal prefill (random Q/K/V).
void attention_alone(AttentionBackend backend, int tokens, int repeats) {
  const int heads = 32, kv_heads = 8, d = 128;
  kc::DeviceKvCache cache(1, kv_heads, d, tokens, nullptr);  // everything here runs on stream 0
  kc::DeviceSequenceKv seq = cache.descriptor();
  const std::size_t slots = std::size_t(kv_heads) * tokens;
  kc::fill_random_bf16(seq.keys, slots * d, 3, 1.0f, 0.0f, nullptr);
  kc::fill_random_bf16(seq.values, slots * d, 4, 1.0f, 0.0f, nullptr);
  std::vector<std::int32_t> positions(slots);
  for (std::size_t i = 0; i < slots; ++i) positions[i] = static_cast<std::int32_t>(i % tokens);
  KVAUDIT_CUDA_CHECK(
      cudaMemcpy(seq.positions, positions.data(), slots * 4, cudaMemcpyHostToDevice));
  std::vector<std::int32_t> lengths(kv_heads, tokens);
  KVAUDIT_CUDA_CHECK(cudaMemcpy(seq.lengths, lengths.data(), kv_heads * 4, cudaMemcpyHostToDevice));
  kc::DeviceBuffer<kc::bf16> q(std::size_t(tokens) * heads * d),
      out(std::size_t(tokens) * heads * d);
  kc::fill_random_bf16(q.data(), q.size(), 5, 1.0f, 0.0f, nullptr);
  kc::DeviceBuffer<std::int32_t> query_positions(tokens);
  query_positions.upload(std::span<const std::int32_t>(positions.data(), std::size_t(tokens)));
  kc::PrefillAttentionProblem p;
  p.sequence = seq;
  p.layer = 0;
  p.num_heads = heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = d;
  p.scale = 1.0f / std::sqrt(float(d));
  p.rows = tokens;
  p.queries = q.data();
  p.query_positions = query_positions.data();
  p.kv_lengths = lengths;
  p.first_query_position = 0;
  p.last_query_position = tokens - 1;
  p.out = out.data();
  cudaStream_t stream = nullptr;
  cublasHandle_t handle = nullptr;
  KVAUDIT_CUBLAS_CHECK(cublasCreate(&handle));
  kc::EagerWorkspace workspace(std::size_t{512} << 20);
  auto run = [&]() {
    if (backend == AttentionBackend::sdpa) {
      kc::prefill_attention_sdpa(p, stream);
    } else {
      kc::prefill_attention_eager(p, workspace, handle, stream);
    }
  };
  run();
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) run();
  KVAUDIT_CUDA_CHECK(cudaDeviceSynchronize());
  const double seconds = seconds_since(start) / repeats;
  const double flops = 2.0 * tokens * (tokens + 1.0) * d * heads;
  report("attention " + std::string(backend == AttentionBackend::sdpa ? "sdpa" : "eager") +
             " one layer T=" + std::to_string(tokens) + " (H32/8, d128)",
         format("%.2f ms  %.0f TFLOP/s", seconds * 1e3, flops / seconds / 1e12));
  cublasDestroy(handle);
}

void prefill(kc::CudaModel& model, int tokens, int repeats, double gemm_ceiling) {
  const auto& c = model.config();
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens));
  for (int i = 0; i < tokens; ++i) ids[std::size_t(i)] = (i * 7919 + 13) % c.vocab_size;
  {
    kc::DeviceKvCache warm = model.new_sequence(tokens + 8);
    model.prefill(warm, ids, LogitRows::last);
  }
  double best = 1e30, total = 0;
  for (int r = 0; r < repeats; ++r) {
    kc::DeviceKvCache cache = model.new_sequence(tokens + 8);
    model.synchronize();
    const auto start = std::chrono::steady_clock::now();
    model.prefill(cache, ids, LogitRows::last);
    const double s = seconds_since(start);
    best = std::min(best, s);
    total += s;
  }
  const double flops = linear_flops_per_token(c) * tokens + attention_flops(tokens, c) +
                       2.0 * c.hidden_size * double(c.vocab_size);
  const std::string name =
      std::string("prefill ") +
      (model.attention_backend() == AttentionBackend::sdpa ? "sdpa" : "eager") +
      " Llama-3.1-8B shapes T=" + std::to_string(tokens);
  report(name, format("best %.1f ms (mean %.1f)", best * 1e3, total / repeats * 1e3));
  report("  " + name + " rate",
         format("%.0f TFLOP/s = MFU %.1f%% of 989; %.1f%% of measured GEMM ceiling",
                flops / best / 1e12, 100.0 * flops / best / kPeakBf16,
                100.0 * flops / best / gemm_ceiling));
  report("  " + name + " floor at 989 TFLOP/s",
         format("%.1f ms (%.1f TFLOP)", flops / kPeakBf16 * 1e3, flops / 1e12));
}

void decode(kc::CudaModel& model, int batch, int context, int steps) {
  const auto& c = model.config();
  std::vector<kc::DeviceKvCache> caches;
  for (int b = 0; b < batch; ++b) {
    caches.push_back(model.new_sequence(context + steps + 8));
    std::vector<std::int32_t> ids(static_cast<std::size_t>(context));
    for (int i = 0; i < context; ++i) ids[std::size_t(i)] = (i * 31 + b * 17) % c.vocab_size;
    model.prefill(caches.back(), ids, LogitRows::none);
  }
  std::vector<kc::DeviceKvCache*> pointers;
  for (auto& cache : caches) pointers.push_back(&cache);
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(batch), 42);
  model.decode_step(pointers, tokens);  // eager first use
  model.decode_step(pointers, tokens);  // capture
  model.synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) model.decode_step(pointers, tokens);
  const double per_step = seconds_since(start) / steps;
  const double kv_bytes =
      double(batch) * (context + steps) * c.num_layers * c.num_kv_heads * c.head_dim * 2.0 * 2.0;
  const double bytes = double(kc::device_weight_bytes(c)) + kv_bytes;
  report(std::string("decode ") +
             (model.attention_backend() == AttentionBackend::sdpa ? "sdpa" : "eager") + " batch " +
             std::to_string(batch) + " ctx " + std::to_string(context),
         format("%.2f ms/step, %.0f tok/s, %.0f GB/s effective", per_step * 1e3, batch / per_step,
                bytes / per_step / 1e9));
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  try {
    const kc::DeviceProbe probe = kc::probe_devices();
    if (probe.devices.empty()) {
      std::printf("bench_cuda: no usable CUDA device (%s); nothing to measure\n",
                  probe.unavailable_reason.c_str());
      return 0;
    }
    std::printf("device %s, driver %s, runtime %s\n", probe.devices[0].name.c_str(),
                kc::cuda_version_text(probe.driver_version).c_str(),
                kc::cuda_version_text(probe.runtime_version).c_str());
    copy_ceiling(quick ? 3 : 10);
    double ceiling = 0;
    {
      kc::Gemm gemm;
      ceiling = gemm_rate(gemm, 8192, 8192, 8192, quick ? 5 : 20);
      report("ceiling: cuBLASLt bf16 GEMM 8192^3", format("%.0f TFLOP/s", ceiling / 1e12));
      report("  GEMM 8192x4096 -> 6144 (fused QKV)",
             format("%.0f TFLOP/s", gemm_rate(gemm, 8192, 4096, 6144, 10) / 1e12));
      report("  GEMM 8192x4096 -> 28672 (gate|up)",
             format("%.0f TFLOP/s", gemm_rate(gemm, 8192, 4096, 28672, 10) / 1e12));
      report("  GEMM 8192x14336 -> 4096 (down)",
             format("%.0f TFLOP/s", gemm_rate(gemm, 8192, 14336, 4096, 10) / 1e12));
    }
    for (AttentionBackend backend : {AttentionBackend::sdpa, AttentionBackend::eager}) {
      attention_alone(backend, 8192, quick ? 2 : 5);
      if (!quick) attention_alone(backend, 32768, 2);
    }
    const auto config = kc::llama31_8b_shapes();
    for (AttentionBackend backend : {AttentionBackend::sdpa, AttentionBackend::eager}) {
      kc::CudaModel model(kc::random_device_weights(config, 2026), backend);
      prefill(model, 8192, quick ? 2 : 3, ceiling);
      if (!quick) prefill(model, 32768, 2, ceiling);
      decode(model, 32, 4096, quick ? 8 : 32);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_cuda: %s\n", error.what());
    return 1;
  }
  std::printf("\n== summary\n");
  for (const Row& row : summary) std::printf("| %s | %s |\n", row.what.c_str(), row.value.c_str());
  return 0;
}

// The CUDA forward pass (prefill, batched prefill, batched decode with CUDA graphs); see
// cuda_model.h. Host code only: the kernels are in kernels/ and attention/, the GEMMs in gemm.h.
#include "runners/cuda/cuda_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "runners/cuda/capture/cuda_prefill_capture.h"
#include "runners/cuda/cuda_check.h"
#include "runners/cuda/decode_graph_key.h"
#include "runners/cuda/kernels/kernels.h"
#include "runners/cuda/memory_planner.h"
#include "runners/cuda/supported_shapes.h"
#include "runners/model/model_error.h"
#include "runners/model/rope_tables.h"

namespace kvaudit::cuda {

// Working buffers for up to `rows` stacked rows (grow-only; a DecodeGraph owns its own).
struct CudaModel::Workspace {
  std::size_t rows = 0;
  DeviceBuffer<bf16> x, normed, qkv, q, attn, proj, gate_up, act;
  DeviceBuffer<bf16> q_pre_rope;  // [rows, H·d], only while an observer asks for pre-RoPE queries
  DeviceBuffer<std::int32_t> tokens, positions, row_sequence, row_offset;
  // Per forward call (sized on demand).
  DeviceBuffer<std::int32_t> new_tokens;       // [sequences]
  DeviceBuffer<DeviceSequenceKv> sequences;    // [sequences]
  DeviceBuffer<std::int32_t> logit_row_index;  // [rows with logits]
  DeviceBuffer<bf16> selected;                 // [rows with logits, hidden]
  DeviceBuffer<bf16> logits;                   // [rows with logits, vocab]

  void allocate(std::size_t n, const model::ModelConfig& c) {
    const std::size_t hidden = static_cast<std::size_t>(c.hidden_size);
    const std::size_t q_width = static_cast<std::size_t>(c.num_heads) * c.head_dim;
    const std::size_t kv_width = static_cast<std::size_t>(c.num_kv_heads) * c.head_dim;
    const std::size_t inter = static_cast<std::size_t>(c.intermediate_size);
    rows = n;
    x = DeviceBuffer<bf16>(n * hidden);
    normed = DeviceBuffer<bf16>(n * hidden);
    qkv = DeviceBuffer<bf16>(n * (q_width + 2 * kv_width));
    q = DeviceBuffer<bf16>(n * q_width);
    attn = DeviceBuffer<bf16>(n * q_width);
    proj = DeviceBuffer<bf16>(n * hidden);
    gate_up = DeviceBuffer<bf16>(n * 2 * inter);
    act = DeviceBuffer<bf16>(n * inter);
    tokens = DeviceBuffer<std::int32_t>(n);
    positions = DeviceBuffer<std::int32_t>(n);
    row_sequence = DeviceBuffer<std::int32_t>(n);
    row_offset = DeviceBuffer<std::int32_t>(n);
  }
  void ensure_logit_rows(std::size_t n, const model::ModelConfig& c) {
    if (logit_row_index.size() >= n && n > 0) return;
    const std::size_t m = std::max<std::size_t>(n, 1);
    logit_row_index = DeviceBuffer<std::int32_t>(m);
    selected = DeviceBuffer<bf16>(m * static_cast<std::size_t>(c.hidden_size));
    logits = DeviceBuffer<bf16>(m * static_cast<std::size_t>(c.vocab_size));
  }
  void ensure_sequences(std::size_t n) {
    if (sequences.size() >= n) return;
    sequences = DeviceBuffer<DeviceSequenceKv>(n);
    new_tokens = DeviceBuffer<std::int32_t>(n);
  }
};

// A captured decode step for one batch composition, with its own buffers (so later growth of the
// model's workspace never invalidates it).
struct CudaModel::DecodeGraph {
  Workspace workspace;
  int uses = 0;
  cudaGraphExec_t exec = nullptr;
  ~DecodeGraph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
};

namespace {

LogitMatrix logits_to_host(const DeviceBuffer<bf16>& logits, int rows, int vocab,
                           cudaStream_t stream) {
  LogitMatrix m;
  m.rows = rows;
  m.vocab = vocab;
  std::vector<bf16> host(static_cast<std::size_t>(rows) * vocab);
  if (!host.empty()) {
    KVAUDIT_CUDA_CHECK(cudaMemcpyAsync(host.data(), logits.data(), host.size() * sizeof(bf16),
                                       cudaMemcpyDeviceToHost, stream));
  }
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream));
  m.values = to_float(host);
  return m;
}

template <typename T>
void upload_async(DeviceBuffer<T>& buffer, const std::vector<T>& host, cudaStream_t stream) {
  if (host.empty()) return;
  if (buffer.size() < host.size()) throw std::logic_error("CudaModel: workspace buffer too small");
  KVAUDIT_CUDA_CHECK(cudaMemcpyAsync(buffer.data(), host.data(), host.size() * sizeof(T),
                                     cudaMemcpyHostToDevice, stream));
}

}  // namespace

namespace {

// The shape check before any upload (supported_shapes.h).
const model::ModelWeights& checked(const model::ModelWeights& weights, AttentionBackend backend) {
  require_cuda_supported(weights.config, backend);
  return weights;
}

}  // namespace

CudaModel::CudaModel(const model::ModelWeights& weights, AttentionBackend backend,
                     CudaModelOptions options)
    : CudaModel(upload_weights(checked(weights, backend)), backend, options) {
  host_weights_ = &weights;
}

CudaModel::CudaModel(DeviceWeights weights, AttentionBackend backend, CudaModelOptions options)
    : weights_(std::move(weights)), backend_(backend), options_(options) {
  initialise();
}

void CudaModel::initialise() {
  const model::ModelConfig& c = config();
  require_cuda_supported(c, backend_);  // again for weights made on the device (benchmarks)
  inv_freq_ = model::rope_inv_freq(c.rope, c.head_dim);
  scale_ = static_cast<float>(std::pow(static_cast<double>(c.head_dim), -0.5));
  KVAUDIT_CUDA_CHECK(cudaStreamCreate(&stream_));
  KVAUDIT_CUBLAS_CHECK(cublasCreate(&cublas_));
  KVAUDIT_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  gemm_ = std::make_unique<Gemm>(options_.gemm_workspace_bytes);
  if (backend_ == AttentionBackend::eager) {
    eager_workspace_ = std::make_unique<EagerWorkspace>(options_.eager_workspace_bytes);
  }
  workspace_ = std::make_unique<Workspace>();
}

CudaModel::~CudaModel() {
  decode_graphs_.clear();
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

DeviceKvCache CudaModel::new_sequence(int capacity) const {
  const model::ModelConfig& c = config();
  return DeviceKvCache(c.num_layers, c.num_kv_heads, c.head_dim, capacity, stream_);
}

void CudaModel::synchronize() const { KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaModel::ensure_rope_table(std::int64_t positions) {
  if (positions <= rope_positions_) return;
  std::int64_t size = std::max<std::int64_t>(4096, rope_positions_);
  while (size < positions) size *= 2;
  const std::size_t d = static_cast<std::size_t>(config().head_dim);
  std::vector<std::int32_t> all(static_cast<std::size_t>(size));
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> cos(all.size() * d), sin(all.size() * d);
  model::rope_cos_sin(inv_freq_, all, model::Rounding::bf16, cos, sin);
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  rope_cos_ = DeviceBuffer<float>(cos.size());
  rope_sin_ = DeviceBuffer<float>(sin.size());
  rope_cos_.upload(cos);
  rope_sin_.upload(sin);
  rope_positions_ = size;
  decode_graphs_.clear();  // they refer to the old tables
}

void CudaModel::ensure_workspace(std::size_t rows) {
  if (workspace_->rows >= rows) return;
  KVAUDIT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  workspace_->allocate(rows, config());
}

void CudaModel::validate(std::span<DeviceKvCache* const> sequences,
                         std::span<const std::span<const std::int32_t>> tokens) const {
  const model::ModelConfig& c = config();
  if (tokens.size() != sequences.size()) {
    throw std::invalid_argument("CudaModel: " + std::to_string(sequences.size()) +
                                " sequences but " + std::to_string(tokens.size()) + " token lists");
  }
  std::set<const DeviceKvCache*> distinct;
  for (std::size_t i = 0; i < sequences.size(); ++i) {
    const DeviceKvCache* s = sequences[i];
    if (s == nullptr)
      throw std::invalid_argument("CudaModel: sequence " + std::to_string(i) + " is null");
    if (!distinct.insert(s).second) {
      throw std::invalid_argument("CudaModel: sequence " + std::to_string(i) +
                                  " appears twice in one batch");
    }
    if (s->num_layers() != c.num_layers || s->num_kv_heads() != c.num_kv_heads ||
        s->head_dim() != c.head_dim) {
      throw std::invalid_argument("CudaModel: sequence " + std::to_string(i) +
                                  " was made for a model of another shape");
    }
    if (tokens[i].empty()) {
      throw std::invalid_argument("CudaModel: sequence " + std::to_string(i) + " has no tokens");
    }
    for (std::size_t t = 0; t < tokens[i].size(); ++t) {
      if (tokens[i][t] < 0 || tokens[i][t] >= c.vocab_size) {
        // Bad input, not a bug: ids come from a tokenizer or a caller (exit 1, not 2).
        throw model::ModelInputError("CudaModel: sequence " + std::to_string(i) + ": token id " +
                                     std::to_string(tokens[i][t]) + " at index " +
                                     std::to_string(t) + " is outside the vocabulary [0, " +
                                     std::to_string(c.vocab_size) + ")");
      }
    }
    s->check_room(static_cast<std::int64_t>(tokens[i].size()));
    if (s->original_length() + static_cast<std::int64_t>(tokens[i].size()) >
        std::numeric_limits<std::int32_t>::max()) {
      throw std::length_error("CudaModel: sequence " + std::to_string(i) +
                              " would exceed 2^31 - 1 positions");
    }
  }
}

LogitMatrix CudaModel::prefill(DeviceKvCache& sequence, std::span<const std::int32_t> tokens,
                               LogitRows rows, CudaPrefillObserver* observer) {
  DeviceKvCache* const sequences[] = {&sequence};
  const std::span<const std::int32_t> token_lists[] = {tokens};
  return std::move(forward(sequences, token_lists, rows, observer).front());
}

std::vector<LogitMatrix> CudaModel::prefill_batch(
    std::span<DeviceKvCache* const> sequences,
    std::span<const std::span<const std::int32_t>> tokens, LogitRows rows) {
  return forward(sequences, tokens, rows, nullptr);
}

void CudaModel::run_layers(Workspace& ws, std::span<DeviceKvCache* const> sequences,
                           std::span<const std::size_t> first_row, std::size_t total_rows,
                           const DeviceSequenceKv* device_sequences,
                           std::span<const std::int32_t> host_positions,
                           bool single_row_per_sequence, CudaPrefillObserver* observer) {
  const model::ModelConfig& c = config();
  const int rows = static_cast<int>(total_rows);
  const int hidden = c.hidden_size;
  const int q_width = c.num_heads * c.head_dim;
  const int kv_width = c.num_kv_heads * c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const bool keep_pre_rope = observer != nullptr && observer->wants_pre_rope_queries();
  const int n_seq = static_cast<int>(sequences.size());

  for (int layer = 0; layer < c.num_layers; ++layer) {
    const DeviceLayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
    rms_norm(ws.x.data(), w.input_norm.data(), rows, hidden, eps, ws.normed.data(), stream_);
    gemm_->linear(ws.normed.data(), rows, hidden, w.qkv.data(), q_width + 2 * kv_width,
                  w.qkv_bias.empty() ? nullptr : w.qkv_bias.data(), ws.qkv.data(), stream_);
    rope_split_append(ws.qkv.data(), rows, c.num_heads, c.num_kv_heads, c.head_dim,
                      rope_cos_.data(), rope_sin_.data(), ws.positions.data(),
                      ws.row_sequence.data(), ws.row_offset.data(), device_sequences, layer,
                      ws.q.data(), keep_pre_rope ? ws.q_pre_rope.data() : nullptr, stream_);
    advance_lengths(device_sequences, n_seq, layer, ws.new_tokens.data(), stream_);

    if (single_row_per_sequence) {
      decode_attention(
          device_sequences, n_seq, layer, c.num_heads, c.num_kv_heads, c.head_dim, scale_,
          backend_ == AttentionBackend::eager ? AttentionNumerics::eager : AttentionNumerics::sdpa,
          ws.q.data(), ws.attn.data(), stream_);
    } else {
      for (int i = 0; i < n_seq; ++i) {
        const std::size_t first = first_row[static_cast<std::size_t>(i)];
        const int count = static_cast<int>(first_row[static_cast<std::size_t>(i) + 1] - first);
        std::vector<std::int32_t> lengths(
            sequences[static_cast<std::size_t>(i)]->lengths(layer).begin(),
            sequences[static_cast<std::size_t>(i)]->lengths(layer).end());
        for (std::int32_t& n : lengths) n += count;
        if (observer != nullptr) {
          CudaPrefillLayerView view;
          view.layer = layer;
          view.num_tokens = count;
          view.num_heads = c.num_heads;
          view.num_kv_heads = c.num_kv_heads;
          view.head_dim = c.head_dim;
          view.first_position = host_positions[first];
          view.positions = ws.positions.data() + first;
          view.queries_pre_rope = keep_pre_rope ? ws.q_pre_rope.data() + first * q_width : nullptr;
          view.queries = ws.q.data() + first * static_cast<std::size_t>(q_width);
          view.sequence = sequences[static_cast<std::size_t>(i)]->descriptor();
          view.kv_lengths = lengths;
          view.scale = scale_;
          observer->on_layer(view, stream_);
        }
        PrefillAttentionProblem p;
        p.sequence = sequences[static_cast<std::size_t>(i)]->descriptor();
        p.layer = layer;
        p.num_heads = c.num_heads;
        p.num_kv_heads = c.num_kv_heads;
        p.head_dim = c.head_dim;
        p.scale = scale_;
        p.rows = count;
        p.queries = ws.q.data() + first * static_cast<std::size_t>(q_width);
        p.query_positions = ws.positions.data() + first;
        p.kv_lengths = lengths;
        p.first_query_position = host_positions[first];
        p.last_query_position = host_positions[first + static_cast<std::size_t>(count) - 1];
        p.out = ws.attn.data() + first * static_cast<std::size_t>(q_width);
        if (backend_ == AttentionBackend::eager) {
          prefill_attention_eager(p, *eager_workspace_, cublas_, stream_);
        } else {
          prefill_attention_sdpa(p, stream_);
        }
      }
    }

    gemm_->linear(ws.attn.data(), rows, q_width, w.o_proj.data(), hidden, nullptr, ws.proj.data(),
                  stream_);
    residual_add(ws.x.data(), ws.proj.data(), total_rows * static_cast<std::size_t>(hidden),
                 stream_);
    rms_norm(ws.x.data(), w.post_attention_norm.data(), rows, hidden, eps, ws.normed.data(),
             stream_);
    gemm_->linear(ws.normed.data(), rows, hidden, w.gate_up.data(), 2 * c.intermediate_size,
                  nullptr, ws.gate_up.data(), stream_);
    silu_mul(ws.gate_up.data(), rows, c.intermediate_size, ws.act.data(), stream_);
    gemm_->linear(ws.act.data(), rows, c.intermediate_size, w.down_proj.data(), hidden, nullptr,
                  ws.proj.data(), stream_);
    residual_add(ws.x.data(), ws.proj.data(), total_rows * static_cast<std::size_t>(hidden),
                 stream_);
  }
}

void CudaModel::run_logits(Workspace& ws, int logit_rows) {
  const model::ModelConfig& c = config();
  gather_rows(ws.x.data(), ws.logit_row_index.data(), logit_rows, c.hidden_size, ws.selected.data(),
              stream_);
  rms_norm(ws.selected.data(), weights_.final_norm.data(), logit_rows, c.hidden_size,
           static_cast<float>(c.rms_norm_eps), ws.selected.data(), stream_);
  gemm_->linear(ws.selected.data(), logit_rows, c.hidden_size, weights_.output_projection(),
                c.vocab_size, nullptr, ws.logits.data(), stream_);
}

std::vector<LogitMatrix> CudaModel::forward(std::span<DeviceKvCache* const> sequences,
                                            std::span<const std::span<const std::int32_t>> tokens,
                                            LogitRows rows, CudaPrefillObserver* observer) {
  validate(sequences, tokens);
  const std::size_t n_seq = sequences.size();
  if (n_seq == 0) return {};
  if (observer != nullptr && n_seq != 1) {
    throw std::invalid_argument("CudaModel: an observer needs a single-sequence prefill");
  }
  std::vector<std::size_t> first_row(n_seq + 1, 0);
  for (std::size_t i = 0; i < n_seq; ++i) first_row[i + 1] = first_row[i] + tokens[i].size();
  const std::size_t total = first_row[n_seq];
  std::vector<std::int32_t> all_tokens(total), positions(total), row_sequence(total),
      row_offset(total), new_tokens(n_seq);
  std::vector<DeviceSequenceKv> descriptors(n_seq);
  std::int64_t max_position = 0;
  bool single_row = observer == nullptr;
  for (std::size_t i = 0; i < n_seq; ++i) {
    const std::int64_t start = sequences[i]->original_length();
    new_tokens[i] = static_cast<std::int32_t>(tokens[i].size());
    descriptors[i] = sequences[i]->descriptor();
    if (tokens[i].size() != 1) single_row = false;
    for (std::size_t t = 0; t < tokens[i].size(); ++t) {
      const std::size_t r = first_row[i] + t;
      all_tokens[r] = tokens[i][t];
      positions[r] = static_cast<std::int32_t>(start + static_cast<std::int64_t>(t));
      row_sequence[r] = static_cast<std::int32_t>(i);
      row_offset[r] = static_cast<std::int32_t>(t);
    }
    max_position =
        std::max<std::int64_t>(max_position, start + static_cast<std::int64_t>(tokens[i].size()));
  }
  ensure_rope_table(max_position);
  ensure_workspace(total);
  Workspace& ws = *workspace_;
  ws.ensure_sequences(n_seq);
  if (observer != nullptr && observer->wants_pre_rope_queries()) {
    const std::size_t needed =
        total * static_cast<std::size_t>(config().num_heads) * config().head_dim;
    if (ws.q_pre_rope.size() < needed) ws.q_pre_rope = DeviceBuffer<bf16>(needed);
  }
  upload_async(ws.tokens, all_tokens, stream_);
  upload_async(ws.positions, positions, stream_);
  upload_async(ws.row_sequence, row_sequence, stream_);
  upload_async(ws.row_offset, row_offset, stream_);
  upload_async(ws.new_tokens, new_tokens, stream_);
  upload_async(ws.sequences, descriptors, stream_);

  embed_tokens(weights_.embed_tokens.data(), config().hidden_size, ws.tokens.data(),
               static_cast<int>(total), ws.x.data(), stream_);
  try {
    run_layers(ws, sequences, first_row, total, ws.sequences.data(), positions, single_row,
               observer);
  } catch (...) {
    restore_lengths(sequences);
    throw;
  }
  for (std::size_t i = 0; i < n_seq; ++i) {
    sequences[i]->record_append(static_cast<std::int64_t>(tokens[i].size()));
  }

  std::vector<std::int32_t> logit_rows;
  std::vector<int> logit_count(n_seq, 0);
  for (std::size_t i = 0; i < n_seq; ++i) {
    const std::size_t n = tokens[i].size();
    if (rows == LogitRows::all) {
      for (std::size_t t = 0; t < n; ++t)
        logit_rows.push_back(static_cast<std::int32_t>(first_row[i] + t));
      logit_count[i] = static_cast<int>(n);
    } else if (rows == LogitRows::last) {
      logit_rows.push_back(static_cast<std::int32_t>(first_row[i] + n - 1));
      logit_count[i] = 1;
    }
  }
  std::vector<LogitMatrix> result(n_seq);
  const int vocab = config().vocab_size;
  if (logit_rows.empty()) {
    synchronize();
    for (auto& m : result) m.vocab = vocab;
    return result;
  }
  ws.ensure_logit_rows(logit_rows.size(), config());
  upload_async(ws.logit_row_index, logit_rows, stream_);
  run_logits(ws, static_cast<int>(logit_rows.size()));
  const LogitMatrix all =
      logits_to_host(ws.logits, static_cast<int>(logit_rows.size()), vocab, stream_);
  std::size_t next = 0;
  for (std::size_t i = 0; i < n_seq; ++i) {
    result[i].rows = logit_count[i];
    result[i].vocab = vocab;
    result[i].values.assign(
        all.values.begin() + static_cast<std::ptrdiff_t>(next * static_cast<std::size_t>(vocab)),
        all.values.begin() +
            static_cast<std::ptrdiff_t>((next + static_cast<std::size_t>(logit_count[i])) *
                                        static_cast<std::size_t>(vocab)));
    next += static_cast<std::size_t>(logit_count[i]);
  }
  return result;
}

LogitMatrix CudaModel::decode_step(std::span<DeviceKvCache* const> batch,
                                   std::span<const std::int32_t> tokens) {
  if (tokens.size() != batch.size()) {
    throw std::invalid_argument("CudaModel::decode_step: " + std::to_string(batch.size()) +
                                " sequences but " + std::to_string(tokens.size()) + " tokens");
  }
  std::vector<std::span<const std::int32_t>> token_lists;
  for (std::size_t i = 0; i < tokens.size(); ++i) token_lists.push_back(tokens.subspan(i, 1));
  validate(batch, token_lists);
  const std::size_t n = batch.size();
  if (n == 0) return LogitMatrix{0, config().vocab_size, {}};

  std::vector<std::int32_t> positions(n), iota(n), zeros(n, 0), ones(n, 1), logit_rows(n);
  std::vector<DeviceSequenceKv> descriptors(n);
  std::int64_t max_position = 0;
  for (std::size_t i = 0; i < n; ++i) {
    positions[i] = static_cast<std::int32_t>(batch[i]->original_length());
    iota[i] = static_cast<std::int32_t>(i);
    logit_rows[i] = static_cast<std::int32_t>(i);
    descriptors[i] = batch[i]->descriptor();
    max_position = std::max<std::int64_t>(max_position, batch[i]->original_length() + 1);
  }
  ensure_rope_table(max_position);
  std::vector<std::int32_t> token_copy(tokens.begin(), tokens.end());
  const DecodeGraphKey key = decode_graph_key(descriptors);

  // Compositions come and go as sequences finish; a bounded cache keeps memory flat over a run.
  if (decode_graphs_.size() >= static_cast<std::size_t>(kMaxDecodeGraphs) &&
      decode_graphs_.count(key) == 0) {
    synchronize();
    decode_graphs_.clear();
  }
  auto& slot = decode_graphs_[key];
  if (!slot) {
    slot = std::make_unique<DecodeGraph>();
    slot->workspace.allocate(n, config());
    slot->workspace.ensure_sequences(n);
    slot->workspace.ensure_logit_rows(n, config());
    // Fixed per composition: descriptors, row bookkeeping, one new token each, logit rows.
    upload_async(slot->workspace.sequences, descriptors, stream_);
    upload_async(slot->workspace.row_sequence, iota, stream_);
    upload_async(slot->workspace.row_offset, zeros, stream_);
    upload_async(slot->workspace.new_tokens, ones, stream_);
    upload_async(slot->workspace.logit_row_index, logit_rows, stream_);
  }
  DecodeGraph& graph = *slot;
  upload_async(graph.workspace.tokens, token_copy, stream_);
  upload_async(graph.workspace.positions, positions, stream_);

  Workspace& ws = graph.workspace;
  std::vector<std::size_t> first_row(n + 1);
  std::iota(first_row.begin(), first_row.end(), std::size_t{0});
  auto launch_step = [&]() {
    embed_tokens(weights_.embed_tokens.data(), config().hidden_size, ws.tokens.data(),
                 static_cast<int>(n), ws.x.data(), stream_);
    run_layers(ws, batch, first_row, n, ws.sequences.data(), positions, true, nullptr);
    run_logits(ws, static_cast<int>(n));
  };
  ++graph.uses;
  try {
    if (!options_.cuda_graphs || graph.uses == 1) {
      launch_step();  // the first use runs eagerly (it also settles cuBLASLt's algorithm choices)
    } else {
      if (graph.exec == nullptr) {
        cudaGraph_t captured = nullptr;
        KVAUDIT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        try {
          launch_step();
        } catch (...) {
          cudaStreamEndCapture(stream_, &captured);
          if (captured != nullptr) cudaGraphDestroy(captured);
          throw;
        }
        KVAUDIT_CUDA_CHECK(cudaStreamEndCapture(stream_, &captured));
        const cudaError_t instantiated = cudaGraphInstantiate(&graph.exec, captured, 0);
        cudaGraphDestroy(captured);
        KVAUDIT_CUDA_CHECK(instantiated);
      }
      KVAUDIT_CUDA_CHECK(cudaGraphLaunch(graph.exec, stream_));
    }
  } catch (...) {
    restore_lengths(batch);
    throw;
  }
  LogitMatrix logits = logits_to_host(ws.logits, static_cast<int>(n), config().vocab_size, stream_);
  for (DeviceKvCache* s : batch) s->record_append(1);
  return logits;
}

void CudaModel::restore_lengths(std::span<DeviceKvCache* const> sequences) noexcept {
  // The layers advance each cache's device lengths one layer at a time (advance_lengths) and the
  // host mirror only after the forward returns: a throw in between (no GEMM algorithm, a capture
  // refusing a view, a failed graph capture) would leave the device ahead of the host, and the
  // next append on that cache would write past what check_room validated. Put the host's counts
  // back. After a sticky CUDA error this fails too; the context is lost then anyway.
  cudaStreamSynchronize(stream_);
  for (DeviceKvCache* s : sequences) s->resync_lengths();
}

}  // namespace kvaudit::cuda

// ---- unit::InferenceEngine
// ------------------------------------------------------------------------
namespace kvaudit::cuda {
std::unique_ptr<unit::SequenceCache> CudaModel::new_cache(std::int64_t capacity) {
  if (capacity < 1 || capacity > std::numeric_limits<int>::max()) {
    throw std::invalid_argument("CudaModel::new_cache: capacity " + std::to_string(capacity) +
                                " is outside [1, 2^31 - 1]");
  }
  return std::make_unique<DeviceKvCache>(new_sequence(static_cast<int>(capacity)));
}

std::unique_ptr<unit::PrefillCapture> CudaModel::new_capture(unit::CaptureOptions options) {
  return std::make_unique<CudaPrefillCapture>(config(), std::move(options));
}

LogitMatrix CudaModel::prefill(unit::SequenceCache& cache, std::span<const std::int32_t> tokens,
                               LogitRows rows, unit::PrefillCapture* capture) {
  CudaPrefillObserver* observer =
      unit::own_capture<CudaPrefillCapture>(capture, "CudaModel::prefill");
  return prefill(unit::own_cache<DeviceKvCache>(&cache, 0, "CudaModel"), tokens, rows, observer);
}

std::vector<LogitMatrix> CudaModel::prefill_batch(
    std::span<unit::SequenceCache* const> caches,
    std::span<const std::span<const std::int32_t>> tokens, LogitRows rows) {
  const std::vector<DeviceKvCache*> sequences =
      unit::own_caches<DeviceKvCache>(caches, "CudaModel");
  return prefill_batch(std::span<DeviceKvCache* const>(sequences), tokens, rows);
}

LogitMatrix CudaModel::decode_step(std::span<unit::SequenceCache* const> caches,
                                   std::span<const std::int32_t> tokens) {
  const std::vector<DeviceKvCache*> sequences =
      unit::own_caches<DeviceKvCache>(caches, "CudaModel");
  return decode_step(std::span<DeviceKvCache* const>(sequences), tokens);
}

int CudaModel::max_concurrent_cells(const unit::UnitDemand& unit_demand) {
  // A unit is planned before it runs: the previous unit's decode graphs (keyed on caches that are
  // gone) are released first, so the free memory measured below is what this unit can use and the
  // plan's decode-graph term covers the graphs it will capture.
  if (!decode_graphs_.empty()) {
    synchronize();
    decode_graphs_.clear();
  }
  UnitMemoryDemand demand;
  demand.prefill_tokens = unit_demand.prefill_tokens;
  demand.capacity = unit_demand.capacity;
  demand.concurrent_cells = std::max(unit_demand.cells, 1);
  demand.logit_rows = std::max(unit_demand.cells, 1);
  demand.backend = backend_;
  demand.gemm_workspace_bytes = options_.gemm_workspace_bytes;
  demand.eager_workspace_bytes = options_.eager_workspace_bytes;
  demand.capture = unit_demand.capture;
  const MemoryPlan plan =
      plan_unit_memory(config(), demand, free_device_memory() + device_weight_bytes(config()));
  if (plan.max_concurrent_cells < 1) {
    throw unit::EngineCapacityError("GPU memory: the unit does not fit the GPU: " + plan.summary);
  }
  return plan.max_concurrent_cells;
}

}  // namespace kvaudit::cuda

// The GGUF tokenizer.ggml.pre name table (transformers' GGUF_PRE_TOKENIZER_SPLITS + GPT-2 names).
#include "runners/model/tokenizer/pretokenizer_patterns.h"

namespace kvaudit::model {

const std::vector<GgufPreTokenizer>& gguf_pre_tokenizers() {
  static const std::vector<GgufPreTokenizer> table = {
      {"default", {}},
      {"gpt-2", {}},
      {"gpt2", {}},
      {"smollm", {}},
      {"llama3", kLlama3SplitPattern},
      {"llama-v3", kLlama3SplitPattern},
      {"llama-bpe", kLlama3SplitPattern},
      {"falcon3", kLlama3SplitPattern},
      {"falcon-h1", kLlama3SplitPattern},
      {"pixtral", kLlama3SplitPattern},
      {"midm-2.0", kLlama3SplitPattern},
      {"lfm2", kLlama3SplitPattern},
      {"jina-v5-nano", kLlama3SplitPattern},
      {"dbrx", kLlama3SplitPattern},
      {"smaug-bpe", kLlama3SplitPattern},
      {"qwen2", kQwen2SplitPattern},
      {"deepseek-r1-qwen", kQwen2SplitPattern},
      {"kormo", kQwen2SplitPattern},
      {"f2llmv2", kQwen2SplitPattern},
      {"megrez", kQwen2SplitPattern},
      {"qwen35", kQwen35SplitPattern},
      {"tekken", kTekkenSplitPattern},
      {"gpt-4o", kGpt4oSplitPattern},
      {"llama4", kGpt4oSplitPattern},
      {"kanana2", kGpt4oSplitPattern},
      {"talkie", kGpt4oSplitPattern},
      {"minimax-m2", kGpt4oSplitPattern},
  };
  return table;
}

}  // namespace kvaudit::model

// KVzip's reconstruction prompt ids as `kvaudit run` builds them for a unit (suite/run/
// unit_instance.h reconstruction_prompt): kvpress 0.5.5 KVzipPress's template head and suffix,
// checked on the embedded default model SmolLM2-135M-Instruct's tokenizer (ChatML; skips, saying
// why, when the GGUF is absent) and for a model without a chat template; and KVzip cells on a
// SmolLM2 chat prompt built as `kvaudit run` builds units (split_prompt, tokenize_prompt_parts,
// reconstruction_prompt): the fan-out equals the naive route and every cell runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "methods/kvzip.h"
#include "runners/cpu/cpu_model.h"
#include "runners/model/formats/load_weights.h"
#include "runners/model/tokenizer/gguf_tokenizer.h"
#include "suite/run/unit_instance.h"
#include "tests/unit_runner/fan_out_check.h"

namespace kvaudit::run {
namespace {

const std::filesystem::path kGguf(KVAUDIT_DEFAULT_GGUF);

TEST(KvzipReconstructionPrompt, HeadAndSuffixOfTheRenderedChatTemplate) {
  if (!std::filesystem::exists(kGguf)) {
    GTEST_SKIP() << "the default model " << kGguf << " is absent (tools/setup.sh fetches it)";
  }
  const auto tokenizer = model::load_gguf_tokenizer(kGguf);
  const model::EncodeOptions options{.add_special_tokens = false, .parse_special = true};
  const auto encode = [&](const std::string& text) { return tokenizer->encode(text, options); };
  const methods::PassPrompt chatml =
      reconstruction_prompt(*tokenizer, model::ChatTemplateKind::chatml);
  // SmolLM2's ChatML renders "dummy context\n#############" as the default system turn, the user
  // header, the content, then "<|im_end|>\n<|im_start|>assistant\n".
  EXPECT_EQ(chatml.prefix_length,
            static_cast<int>(encode("<|im_start|>system\nYou are a helpful AI assistant named "
                                    "SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\n")
                                 .size()));
  EXPECT_EQ(chatml.suffix, encode("<|im_end|>\n<|im_start|>assistant\n"));
  EXPECT_EQ(chatml.repeat_first, encode("\n\nRepeat the previous context exactly."));
  EXPECT_EQ(chatml.repeat_next,
            encode("\n\nRepeat the part of the previous context exactly, starting with"));
  EXPECT_GT(chatml.prefix_length, 4);
  // Without a chat template kvpress uses no head and the suffix "\n".
  const methods::PassPrompt none = reconstruction_prompt(*tokenizer, model::ChatTemplateKind::none);
  EXPECT_EQ(none.prefix_length, 0);
  EXPECT_EQ(none.suffix, encode("\n"));
  EXPECT_EQ(none.repeat_first, chatml.repeat_first);
}

TEST(KvzipReconstructionPrompt, KvzipCellsRunOnASmolLM2ChatUnit) {
  if (!std::filesystem::exists(kGguf)) {
    GTEST_SKIP() << "the default model " << kGguf << " is absent (tools/setup.sh fetches it)";
  }
  const model::ModelWeights weights = model::load_model_weights(kGguf);
  const auto tokenizer = model::load_gguf_tokenizer(kGguf);
  cpu::CpuModel model(weights, AttentionBackend::sdpa);
  model::PromptSplitInput input;
  input.kind = model::ChatTemplateKind::chatml;
  input.context =
      "The harbour master of Velden keeps a ledger of every ship. On Monday the Aurora arrived "
      "with salt, on Tuesday the Brisk left for Norden with timber, and on Wednesday the Cormorant "
      "came in with forty barrels of herring and a broken mast.";
  input.question = " Which ship had a broken mast?";
  input.answer_prefix = "Answer:";
  unit::UnitTokens tokens = tokenize_prompt_parts(*tokenizer, model::split_prompt(input));
  tokens.pass_prompt = reconstruction_prompt(*tokenizer, model::ChatTemplateKind::chatml);

  methods::KvzipParams plus;
  plus.variant = methods::KvzipVariant::kvzip_plus;
  methods::KvzipParams chunked;
  chunked.chunk_size = 24;  // several reconstruction chunks
  const methods::KvzipMethod kvzip_plus(plus), kvzip_chunked(chunked);
  std::vector<unit::CellSpec> cells;
  std::uint64_t key = 1;
  // Query-aware: the reconstruction repeats context and question (the tiny-model tests cover both
  // protocols).
  cells.push_back({&kvzip_plus, {.compression = 0.5}, Protocol::query_aware, key++});
  cells.push_back({&kvzip_chunked, {.compression = 0.75}, Protocol::query_aware, key++});
  unit::UnitRunOptions options;
  options.decode.max_new_tokens = 6;
  for (int eos : weights.config.eos_token_ids) options.decode.stop_token_ids.push_back(eos);
  const unit::UnitResult result = unit::testing::expect_fan_out_equals_naive(
      model, weights, tokens, cells, options, "SmolLM2 kvzip");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    EXPECT_EQ(result.cells[i].status, unit::CellStatus::ok) << i << ": " << result.cells[i].error;
    EXPECT_FALSE(result.cells[i].generated.empty()) << i;
  }
}

}  // namespace
}  // namespace kvaudit::run

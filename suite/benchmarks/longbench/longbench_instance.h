// One LongBench evaluation instance, ready for both protocols kvaudit runs:
//
// * LongBench protocol (THUDM/LongBench pred.py): prompt = dataset2prompt.format(**record),
//   middle-truncated to `max_prompt_tokens` by the evaluated tokenizer (middle_truncation.h), then
//   wrapped in the chat template as one user turn, except for trec, triviaqa, samsum, lsht, lcc and
//   repobench-p (LongBenchChatRule::longbench) — or for every task (LongBenchChatRule::always, what
//   kvpress does). A templated prompt is tokenized without added special tokens (the rendered
//   text carries BOS, as with HF apply_chat_template(tokenize=True)); a raw prompt with them (as
//   pred.py's tokenizer(prompt) call). Budget: dataset2maxlen.
// * kvpress split (create_huggingface_dataset.py): context | question | answer prefix
//   (longbench_prompt.h), rendered with runners/model/chat split_prompt into the three parts the
//   unit runner feeds (prefix+context is compressed; question; template suffix + answer prefix).
//   Budget: dataset2maxlen + 20.
//
// Truncation of the split: pred.py's rule is applied to the kvpress prompt text
// (context + question + answer_prefix, which equals the LongBench prompt for well-formed records),
// and the question and answer prefix are then cut off its end again; so only the context loses
// its middle, by exactly the tokens pred.py removes. If the truncated text no longer ends with
// question + answer prefix (a limit so small that the tail half does not cover them, or a
// tokenizer whose decode does not reproduce them), the instance is refused with an InputError.
//
// Lengths (docs/design/benchmarks.md §Tokenizer check): original_prompt_tokens is pred.py's
// count of the untruncated prompt (special tokens included); final_prompt_tokens counts the
// LongBench-protocol prompt as fed; split_*_tokens count the three split parts, each encoded
// without added special tokens (BOS is part of the rendered text), as kvaudit's runner tokenizes
// them separately (docs/design/protocols.md §Separate tokenization).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runners/model/chat/chat_template.h"
#include "runners/model/chat/prompt_split.h"
#include "runners/model/tokenizer/tokenizer.h"
#include "suite/benchmarks/longbench/longbench_jsonl.h"

namespace kvaudit::benchmarks {

// Which tasks get the chat template.
enum class LongBenchChatRule {
  longbench,  // pred.py: all but trec, triviaqa, samsum, lsht, lcc, repobench-p
  always,     // kvpress: every task, whenever the model has a template
};

std::string_view longbench_chat_rule_name(LongBenchChatRule rule);  // "longbench", "always"

struct LongBenchChatOptions {
  // The model's template; none = no chat template at all (then the rule does not matter).
  model::ChatTemplateKind kind = model::ChatTemplateKind::none;
  // llama3_date_string, control-token policy, and bos_text: the BOS text kvpress prepends to the
  // split context when no template is applied (the tokenizer's bos_token; "" when it has none).
  // add_generation_prompt is always true here.
  model::RenderOptions render;
  LongBenchChatRule rule = LongBenchChatRule::longbench;
};

struct LongBenchInstance {
  std::string task;     // as loaded, e.g. "hotpotqa" or "qasper_e"
  std::string dataset;  // the record's dataset field
  std::string id;       // the record's _id
  std::size_t source_line = 0;
  std::vector<std::string> answers;
  std::optional<std::vector<std::string>> all_classes;
  std::int64_t length = 0;         // the record's word/character count (LongBench-E buckets)
  int max_new_tokens = 0;          // dataset2maxlen (LongBench protocol)
  int kvpress_max_new_tokens = 0;  // dataset2maxlen + 20 (kvpress)

  bool chat_template_applied = false;  // per the rule, and a template exists
  model::ChatTemplateKind chat_template = model::ChatTemplateKind::none;  // what was applied

  // kvpress split, the context middle-truncated when needed.
  std::string context;
  std::string question;
  std::string answer_prefix;
  model::PromptParts split_parts;  // split_prompt(chat_template, context, question, answer_prefix)

  // LongBench protocol.
  std::string prompt;                           // after middle truncation, before the chat template
  std::string final_prompt;                     // what is tokenized and fed
  bool final_prompt_add_special_tokens = true;  // encode(final_prompt, add_special_tokens=...)

  // Lengths in tokens of the evaluated tokenizer.
  std::size_t max_prompt_tokens = 0;       // the limit the caller gave (pred.py max_length)
  std::size_t original_prompt_tokens = 0;  // untruncated LongBench prompt, pred.py's count
  bool truncated = false;                  // original_prompt_tokens > max_prompt_tokens
  std::size_t final_prompt_tokens = 0;     // final_prompt as fed
  std::size_t split_context_tokens = 0;    // split_parts.prefix_plus_context
  std::size_t split_question_tokens = 0;   // split_parts.question
  std::size_t split_suffix_tokens = 0;     // split_parts.suffix_plus_answer_prefix
};

// Builds the instance of `record` (read from `task`'s file). max_prompt_tokens is pred.py's
// max_length: the model's window minus a margin for generation (and, if desired, the chat
// template's overhead), chosen by the caller; at least 2. Throws kvaudit::InputError naming the
// task, the record's _id and line for a limit below 2, a split that truncation destroyed, or text
// that the tokenizer or chat template rejects.
LongBenchInstance build_longbench_instance(const LongBenchRecord& record,
                                           const LongBenchTaskRef& task,
                                           const model::Tokenizer& tokenizer,
                                           const LongBenchChatOptions& chat,
                                           std::size_t max_prompt_tokens);

// Every record of a loaded task file, in file order.
std::vector<LongBenchInstance> build_longbench_instances(const LongBenchTaskData& data,
                                                         const model::Tokenizer& tokenizer,
                                                         const LongBenchChatOptions& chat,
                                                         std::size_t max_prompt_tokens);

}  // namespace kvaudit::benchmarks

// RULER vt (NVIDIA/RULER scripts/data/synthetic/variable_tracking.py; docs/design/benchmarks.md
// §RULER task families): one chain of 4 hops (5 variables of 5 random upper-case letters, value a
// random integer in [10000, 99999)) written as "VAR AAAAA = 12345", "VAR BBBBB = VAR AAAAA "
// (trailing space) into a haystack of noise sentences at sorted random positions (chain order
// kept), lines joined with "\n"; gold = the 5 variable names.
// One-shot example, always on: built once per (seed, task, length) like a real sample but with
// 3-letter names and value 12345, its noise count the largest whose text (input + answer prefix,
// no chat template) stays within 500 generation-tokenizer tokens (RULER's max_seq_length=500 call,
// unit 5), followed by " " + its 5 names + "\n". For each instance its names are replaced (every
// occurrence, in order) by fresh random upper-case strings of the same length and "12345" by a
// fresh value, then it is put before the task text with "\n".
#include <algorithm>

#include "suite/benchmarks/ruler/ruler_random.h"
#include "suite/benchmarks/ruler/ruler_templates.h"
#include "suite/benchmarks/ruler/task_builder.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

constexpr std::string_view kUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
constexpr std::size_t kHops = 4;
constexpr std::size_t kExampleTokens = 500;

struct Chain {
  std::vector<std::string> names;
  std::vector<std::string> lines;
  std::string value;
};

Chain make_chain(RulerRng& rng, std::size_t name_length, const std::string* fixed_value) {
  Chain c;
  while (c.names.size() < kHops + 1) {
    std::string name = rng.letters(kUpper, name_length);
    if (std::find(c.names.begin(), c.names.end(), name) == c.names.end()) {
      c.names.push_back(std::move(name));
    }
  }
  c.value = fixed_value ? *fixed_value : std::to_string(rng.between(10000, 99998));
  c.lines.push_back("VAR " + c.names[0] + " = " + c.value);
  for (std::size_t j = 0; j < kHops; ++j) {
    c.lines.push_back("VAR " + c.names[j + 1] + " = VAR " + c.names[j] + " ");
  }
  return c;
}

std::string render(const Chain& chain, RulerRng& layout, std::size_t noises) {
  std::vector<std::string> sentences(noises, std::string(kNoiseSentence));
  auto positions = layout.sample_indices(sentences.size(), chain.lines.size());
  std::sort(positions.begin(), positions.end());
  for (std::size_t j = 0; j < positions.size(); ++j) {
    sentences.insert(sentences.begin() + static_cast<std::ptrdiff_t>(positions[j] + j),
                     chain.lines[j]);
  }
  std::string context;
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    if (i) context += '\n';
    context += sentences[i];
  }
  context = replace_all(context, ". \n", ".\n");
  const auto& t = family_template(Family::variable_tracking);
  const std::string full = std::string(t.template_text) + std::string(t.answer_prefix);
  const std::string num_v = std::to_string(kHops + 1);
  return format_template(full, {{"context", context}, {"query", chain.value}, {"num_v", num_v}});
}

class VariableTrackingBuilder final : public TaskBuilder {
 public:
  explicit VariableTrackingBuilder(const BuilderContext& context) : context_(context) {
    build_example();
  }

  std::string_view unit_name() const override { return "sentence"; }
  std::size_t min_units() const override { return kHops + 1; }
  std::size_t probe_units() const override { return context_.length < 4096 ? 5 : 10; }

  InstanceDraft draft(std::uint32_t index) const override {
    RulerRng content(context_.seed, context_.task_id, context_.length, index, RulerStream::content);
    const Chain chain = make_chain(content, 5, nullptr);
    RulerRng fewshot(context_.seed, context_.task_id, context_.length, index, RulerStream::fewshot);
    std::string example = example_text_;
    for (const auto& name : example_names_) {
      example = replace_all(example, name, fewshot.letters(kUpper, name.size()));
    }
    example = replace_all(example, "12345", std::to_string(fewshot.between(10000, 99998)));
    return [this, index, chain, example](std::size_t units) {
      RulerRng layout(context_.seed, context_.task_id, context_.length, index, RulerStream::layout);
      return TaskText{example + "\n" + render(chain, layout, units), chain.names};
    };
  }

 private:
  void build_example() {
    RulerRng rng(context_.seed, context_.task_id, context_.length, kFixedInstance,
                 RulerStream::example);
    const std::string icl_value = "12345";
    const Chain chain = make_chain(rng, 3, &icl_value);
    const auto text_for = [&](std::size_t noises) {
      RulerRng layout(context_.seed, context_.task_id, context_.length, kFixedInstance,
                      RulerStream::layout);
      return render(chain, layout, noises);
    };
    const auto fits = [&](std::size_t noises) {
      return context_.count_raw_tokens(text_for(noises)) <= kExampleTokens;
    };
    // The largest noise count within 500 tokens: double, then bisect (the count is monotone in
    // practice; the chosen text is measured).
    std::size_t lo = 0;
    std::size_t hi = 5;
    if (!fits(hi)) {
      throw InternalError("RULER vt: the one-shot example does not fit 500 tokens");
    }
    while (fits(hi)) {
      lo = hi;
      hi *= 2;
    }
    while (hi - lo > 1) {
      const std::size_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    example_text_ = text_for(lo) + " ";
    for (std::size_t i = 0; i < chain.names.size(); ++i) {
      example_text_ += (i ? " " : "") + chain.names[i];
    }
    example_text_ += "\n";
    example_names_ = chain.names;
  }

  BuilderContext context_;
  std::string example_text_;
  std::vector<std::string> example_names_;
};

}  // namespace

std::unique_ptr<TaskBuilder> make_variable_tracking_builder(const BuilderContext& context) {
  return std::make_unique<VariableTrackingBuilder>(context);
}

}  // namespace kvaudit::benchmarks::ruler

// RULER qa_1 / qa_2 (NVIDIA/RULER scripts/data/synthetic/qa.py; docs/design/benchmarks.md
// §RULER task families):
// instance i asks question i of the data set (in file order; kvaudit wraps around with i modulo
// the number of questions where RULER would stop). For N documents: below the data set's size,
// the gold documents, then the question's same-article documents ("more"), then random others
// (or, when "more" alone suffices, the gold plus a random subset of "more"); at or above it, the
// whole document list repeated to N. The pool is shuffled with the fixed stream (RULER:
// random.Random(seed), so the gold document lands at the same position for every instance with the
// same N) and rendered "Document {i}:\n{document}", joined with "\n\n".
#include <algorithm>
#include <set>

#include "suite/benchmarks/ruler/qa_data.h"
#include "suite/benchmarks/ruler/ruler_random.h"
#include "suite/benchmarks/ruler/ruler_templates.h"
#include "suite/benchmarks/ruler/task_builder.h"
#include "base/errors.h"

namespace kvaudit::benchmarks::ruler {
namespace {

class QaBuilder final : public TaskBuilder {
 public:
  explicit QaBuilder(const BuilderContext& context) : context_(context) {
    if (context_.qa == nullptr) throw InternalError("RULER qa: no data set loaded");
    const auto& t = family_template(Family::qa);
    template_ = std::string(t.template_text) + std::string(t.answer_prefix);
  }

  std::string_view unit_name() const override { return "document"; }
  std::size_t min_units() const override {
    std::size_t most = 1;
    for (const auto& q : context_.qa->questions) most = std::max(most, q.gold_docs.size());
    return most;
  }
  std::size_t probe_units() const override { return 10; }

  InstanceDraft draft(std::uint32_t index) const override {
    const auto& questions = context_.qa->questions;
    const QaQuestion& q = questions[index % questions.size()];
    return [this, index, &q](std::size_t units) {
      const auto& docs = context_.qa->documents;
      RulerRng layout(context_.seed, context_.task_id, context_.length, index, RulerStream::layout);
      std::vector<std::size_t> chosen;
      if (units < docs.size()) {
        const std::size_t gold = q.gold_docs.size();
        chosen = q.gold_docs;
        if (units < gold) {
          chosen.resize(units);
        } else if (units - gold > q.more_docs.size()) {
          chosen.insert(chosen.end(), q.more_docs.begin(), q.more_docs.end());
          const std::set<std::size_t> used(chosen.begin(), chosen.end());
          std::vector<std::size_t> others;
          for (std::size_t i = 0; i < docs.size(); ++i) {
            if (!used.contains(i)) others.push_back(i);
          }
          const std::size_t extra = std::min(others.size(), units - chosen.size());
          for (const auto i : layout.sample_indices(others.size(), extra)) {
            chosen.push_back(others[i]);
          }
        } else {
          for (const auto i : layout.sample_indices(q.more_docs.size(), units - gold)) {
            chosen.push_back(q.more_docs[i]);
          }
        }
      } else {
        for (std::size_t i = 0; i < units; ++i) chosen.push_back(i % docs.size());
      }
      RulerRng fixed(context_.seed, context_.task_id, context_.length, kFixedInstance,
                     RulerStream::fixed);
      fixed.shuffle(chosen);
      std::string context;
      for (std::size_t i = 0; i < chosen.size(); ++i) {
        if (i) context += "\n\n";
        const std::string number = std::to_string(i + 1);
        context +=
            format_template(kDocumentTemplate, {{"i", number}, {"document", docs[chosen[i]]}});
      }
      return TaskText{format_template(template_, {{"context", context}, {"query", q.query}}),
                      q.answers};
    };
  }

 private:
  BuilderContext context_;
  std::string template_;
};

}  // namespace

std::unique_ptr<TaskBuilder> make_qa_builder(const BuilderContext& context) {
  return std::make_unique<QaBuilder>(context);
}

}  // namespace kvaudit::benchmarks::ruler

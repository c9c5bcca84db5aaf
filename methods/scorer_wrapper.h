// ScorerWrapperMethod: the base of every method built around one wrapped Scorer — ScorerMethod
// (plain top-k) and the wrappers (adakv, chunkkv, chunk, critical_adakv, entropy_gated_chunkkv,
// key_rerotation, per_layer_compression, squeezeattention). The capture a cell needs is what the
// scorer reads; the name is "<kind>(<scorer>)", or the scorer's own name when kind is empty.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "methods/method.h"

namespace kvaudit::methods {

class ScorerWrapperMethod : public Method {
 public:
  int window_needed() const override { return scorer_->window_needed(); }
  bool needs_column_sums() const override { return scorer_->needs_column_sums(); }
  bool needs_query_moments() const override { return scorer_->needs_query_moments(); }
  bool needs_all_queries() const override { return scorer_->needs_all_queries(); }
  bool needs_attention_input() const override { return scorer_->needs_attention_input(); }
  std::string name() const override {
    return kind_.empty() ? scorer_->name() : kind_ + "(" + scorer_->name() + ")";
  }
  const Scorer& scorer() const { return *scorer_; }

 protected:
  ScorerWrapperMethod(std::string kind, std::shared_ptr<const Scorer> scorer)
      : scorer_(std::move(scorer)), kind_(std::move(kind)) {}

  std::shared_ptr<const Scorer> scorer_;

 private:
  std::string kind_;
};

}  // namespace kvaudit::methods

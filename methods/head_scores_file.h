// The head-importance file HeadKV reads (methods/headkv.h): the official HeadKV format
// (github.com/FYYFU/HeadKV, Important_Head/head_score/*.json), one JSON object
//   {"<layer>-<head>": score or [score, ...], ...}
// with a key for every (layer, query head) of the model. A list is averaged (the official code
// takes np.mean of each list). Checked here, without knowing the model: valid JSON; an object;
// every key
// "<int>-<int>" with non-negative integers; every value a finite, non-negative number or a
// non-empty list of them; the keys cover a full rectangle 0..layers-1 × 0..heads-1; some score > 0.
// The model's shape is compared by the method (HeadKvMethod::select).
//
// It is part of the catalogue library so that the plan can check the file (catalog.cpp
// ParamSpec::check_file) without linking the methods.
#pragma once

#include <string>
#include <vector>

namespace kvaudit::methods {

struct HeadScores {
  int layers = 0;
  int heads = 0;              // query heads per layer
  std::vector<double> score;  // [layers × heads], layer-major: the mean of each key's value
  double at(int layer, int head) const {
    return score[static_cast<std::size_t>(layer) * static_cast<std::size_t>(heads) +
                 static_cast<std::size_t>(head)];
  }
};

// Parses the JSON text; std::invalid_argument saying what is wrong (without the file name).
HeadScores parse_head_scores(const std::string& json_text);
// Reads and parses `path`; std::invalid_argument as above (also when the file cannot be read).
HeadScores read_head_scores(const std::string& path);

}  // namespace kvaudit::methods

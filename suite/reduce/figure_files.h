// Writing figures to disk and rendering them: for each figure <name>.dat, <name>.gp (which draws
// <name>.png with pngcairo and <name>.svg with the svg terminal, and can be rerun by hand with
// `gnuplot <name>.gp` in the figures directory) and, when gnuplot is available, the images.
// Without gnuplot, or when it fails, the scripts and data are still written and the report says
// why the images are missing.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "suite/reduce/figures.h"

namespace kvaudit::reduce {

struct RenderedFigure {
  std::string name;
  std::string title;
  std::string caption;
  bool png = false;     // <name>.png exists and starts with the PNG signature
  bool svg = false;     // <name>.svg exists and has an <svg element
  std::string message;  // why an image is missing
};

// The gnuplot script of a figure (both terminals).
std::string gnuplot_script(const Figure& figure);

std::vector<RenderedFigure> write_figures(const std::filesystem::path& directory,
                                          const std::vector<Figure>& figures,
                                          const std::optional<std::filesystem::path>& gnuplot);

}  // namespace kvaudit::reduce

// Writing and rendering figures (see figure_files.h).
#include "suite/reduce/figure_files.h"

#include <fstream>
#include <iterator>

#include "base/errors.h"
#include "suite/reduce/gnuplot_runner.h"

namespace kvaudit::reduce {
namespace {

// Line styles: a colour-blind-safe palette (Okabe–Ito, its yellow darkened to stay visible on
// white, then Tableau), one per method index.
const char* const kColours[] = {"#000000", "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9",
                                "#d55e00", "#b8860b", "#7f7f7f", "#8c564b", "#17becf", "#bcbd22",
                                "#9467bd", "#2ca02c", "#ff7f0e", "#1f77b4"};

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw InternalError("cannot write " + path.string());
}

std::string read_prefix(const std::filesystem::path& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

}  // namespace

std::string gnuplot_script(const Figure& f) {
  std::string header = "# kvaudit figure " + f.name + ": " + f.title +
                       "\n# Rerun in this directory: gnuplot " + f.name + ".gp  (reads " + f.name +
                       ".dat, writes " + f.name + ".png and " + f.name +
                       ".svg)\nset encoding utf8\nset datafile missing '?'\n";
  for (std::size_t i = 0; i < std::size(kColours); ++i) {
    const int pt = static_cast<int>(i % 6) + 4;  // 4..9: squares, circles, triangles, diamonds
    header += "set linetype " + std::to_string(i + 1) + " lc rgb '" + kColours[i] + "' lw 2 pt " +
              std::to_string(pt) + " ps 1.1\n";
  }
  header += "set linetype cycle " + std::to_string(std::size(kColours)) + "\n";
  const std::string size = std::to_string(f.width) + "," + std::to_string(f.height);
  return header + "set terminal pngcairo size " + size +
         " font 'DejaVu Sans,11' noenhanced background rgb 'white'\nset output '" + f.name +
         ".png'\n" + f.plot + "unset output\nreset\nset encoding utf8\nset datafile missing '?'\n" +
         "set terminal svg size " + size +
         " font 'DejaVu Sans,11' noenhanced dynamic background rgb 'white'\nset output '" + f.name +
         ".svg'\n" + f.plot + "unset output\n";
}

std::vector<RenderedFigure> write_figures(const std::filesystem::path& dir,
                                          const std::vector<Figure>& figures,
                                          const std::optional<std::filesystem::path>& gnuplot) {
  std::vector<RenderedFigure> out;
  if (figures.empty()) return out;
  std::filesystem::create_directories(dir);
  for (const Figure& f : figures) {
    RenderedFigure r{f.name, f.title, f.caption, false, false, ""};
    write_text(dir / (f.name + ".dat"), f.data);
    write_text(dir / (f.name + ".gp"), gnuplot_script(f));
    if (!gnuplot) {
      r.message =
          "gnuplot not found (install gnuplot-nox, or set KVAUDIT_GNUPLOT); the script "
          "and data are in figures/";
      out.push_back(std::move(r));
      continue;
    }
    const GnuplotRun run = run_gnuplot(*gnuplot, dir / (f.name + ".gp"));
    const auto png = dir / (f.name + ".png");
    const auto svg = dir / (f.name + ".svg");
    r.png = std::filesystem::exists(png) && read_prefix(png, 8) == "\x89PNG\r\n\x1a\n";
    r.svg =
        std::filesystem::exists(svg) && read_prefix(svg, 4096).find("<svg") != std::string::npos;
    if (!run.ok)
      r.message = run.message;
    else if (!r.png || !r.svg)
      r.message = "gnuplot finished but an image is missing or not valid";
    else
      std::filesystem::remove(dir / (f.name + ".gp.log"));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace kvaudit::reduce

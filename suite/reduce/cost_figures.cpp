// The cost figures: gnuplot scripts and data (see cost_figures.h).
#include "suite/reduce/cost_figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

namespace kvaudit::reduce {
namespace {

// A gnuplot single-quoted string (' doubled).
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// The same colour per method as figures.cpp (line type = method index + 2; full KV 1), and a
// point type per method so that methods stay apart in print.
int point_type(std::int16_t method) {
  static constexpr int kPointTypes[] = {5, 7, 9, 11, 13, 4, 6, 8, 10, 12, 14, 1, 2, 3};
  return kPointTypes[static_cast<std::size_t>(std::max<std::int16_t>(method, 0)) %
                     std::size(kPointTypes)];
}

struct Axis {
  const char* stem;   // "bytes" / "time"
  const char* what;   // title part
  const char* label;  // x axis label; {unit} stands for the unit
  double CostRow::*value;
  bool CostRow::*front;
};

constexpr Axis kAxes[] = {
    {"bytes", "Accuracy vs kept KV bytes", "mean kept KV cache per cell after eviction ({unit})",
     &CostRow::kept_bytes, &CostRow::front_bytes},
    {"time", "Accuracy vs time",
     "mean time per cell in {unit} (prefill to decode, shared steps apportioned)",
     &CostRow::total_ms, &CostRow::front_time},
};

// The unit bytes are shown in (the largest binary unit of which the largest value has at least
// one), as (divisor, name).
std::pair<double, std::string> byte_unit(double largest) {
  if (largest >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (largest >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  if (largest >= 1024.0) return {1024.0, "KiB"};
  return {1.0, "bytes"};
}

// Milliseconds, or seconds from 10 s on.
std::pair<double, std::string> time_unit(double largest_ms) {
  return largest_ms >= 10000 ? std::pair<double, std::string>{1000.0, "s"}
                             : std::pair<double, std::string>{1.0, "ms"};
}

bool usable(const CostRow& r, const Axis& axis) {
  return std::isfinite(r.*axis.value) && std::isfinite(r.accuracy);
}

}  // namespace

std::vector<Figure> build_cost_figures(const AnalysisContext& ctx, const CostAnalysis& costs) {
  std::vector<Figure> out;
  if (!costs.has_costs()) return out;
  // (benchmark, backend, model) -> protocol -> rows.
  std::map<std::tuple<std::uint16_t, std::uint8_t, std::uint16_t>,
           std::map<std::uint8_t, std::vector<const CostRow*>>>
      panels;
  for (const CostRow& r : costs.rows) {
    if (r.n > 0) panels[{r.benchmark, r.backend, r.model}][r.protocol].push_back(&r);
  }
  for (const Axis& axis : kAxes) {
    for (const auto& [key, protocols] : panels) {
      const auto& [bench_code, backend_code, model_code] = key;
      const std::string bench = ctx.label(Dim::benchmark, bench_code);
      const std::string backend = ctx.label(Dim::backend, backend_code);
      const std::string model = ctx.label(Dim::model, model_code);
      Figure f;
      f.name = std::string("cost_") + axis.stem + "_" + file_stem(bench) + "_" +
               file_stem(backend) + "_" + file_stem(model);
      f.title = std::string(axis.what) + ": " + bench + ", " + backend + ", " + model;
      double low = std::numeric_limits<double>::infinity(), high = 0;
      for (const auto& [protocol, rows] : protocols) {
        for (const CostRow* r : rows) {
          if (!usable(*r, axis)) continue;
          low = std::min(low, r->*axis.value);
          high = std::max(high, r->*axis.value);
        }
      }
      if (!(high > 0)) continue;  // no point to draw (no costs for these cells)
      const bool log_scale = low > 0 && high / low >= 8;
      const bool bytes = axis.value == &CostRow::kept_bytes;
      const auto [divisor, unit] = bytes ? byte_unit(high) : time_unit(high);
      std::string label = axis.label;
      label.replace(label.find("{unit}"), 6, unit);
      std::ostringstream data, plot;
      int index = 0;
      plot << "set multiplot layout 1," << protocols.size() << " title " << quoted(f.title) << "\n"
           << "set xlabel " << quoted(label) << "\n"
           << "set ylabel 'mean utility'\nset grid\nset yrange [-0.02:1.05]\n"
           << (log_scale ? "set logscale x\n" : "") << "set format x '%g'\n"
           << "set offsets graph 0.05, graph 0.05, 0, 0\n"
           << "set key below box width 1\nset bmargin 10\n";
      for (auto it = protocols.rbegin(); it != protocols.rend(); ++it) {
        const auto& [protocol, rows] = *it;
        std::map<std::int16_t, std::vector<std::pair<double, double>>> methods;
        std::vector<std::pair<double, double>> front;
        for (const CostRow* r : rows) {
          if (!usable(*r, axis)) continue;
          methods[r->method].emplace_back(r->*axis.value / divisor, r->accuracy);
          if (r->*axis.front) front.emplace_back(r->*axis.value / divisor, r->accuracy);
        }
        std::string clauses;
        const std::string file = quoted(f.name + ".dat");
        for (auto& [method, points] : methods) {
          std::sort(points.begin(), points.end());
          data << "# " << ctx.label(Dim::protocol, protocol) << " "
               << ctx.label(Dim::method, method) << ": cost utility\n";
          for (const auto& [x, y] : points) data << number(x) << " " << number(y) << "\n";
          data << "\n\n";
          const std::string style =
              method < 0 ? "with points pt 3 ps 2.5 lw 2 lc rgb 'black' title 'full KV'"
                         : "with linespoints lt " + std::to_string(method_line_type(method)) +
                               " pt " + std::to_string(point_type(method)) + " ps 1.4 lw 2 title " +
                               quoted(ctx.label(Dim::method, method));
          clauses += (clauses.empty() ? "" : ", \\\n     ") + file + " index " +
                     std::to_string(index) + " using 1:2 " + style;
          ++index;
        }
        std::sort(front.begin(), front.end());
        data << "# " << ctx.label(Dim::protocol, protocol) << " Pareto front: cost utility\n";
        for (const auto& [x, y] : front) data << number(x) << " " << number(y) << "\n";
        data << "\n\n";
        clauses += ", \\\n     " + file + " index " + std::to_string(index) +
                   " using 1:2 with steps lc rgb 'black' dt 2 lw 1.5 title 'Pareto front', \\\n"
                   "     " +
                   file + " index " + std::to_string(index) +
                   " using 1:2 with points pt 6 ps 3 lw 1.5 lc rgb 'black' notitle";
        ++index;
        plot << "set title " << quoted(ctx.label(Dim::protocol, protocol)) << "\n"
             << "plot " << clauses << "\n";
      }
      plot << "unset multiplot\n";
      f.data = data.str();
      f.plot = plot.str();
      f.width = protocols.size() > 1 ? 1400 : 900;
      f.height = 760;
      f.caption = std::string("Mean utility per method and budget against the mean ") +
                  (bytes ? "kept KV bytes per cell (the compressed cache before feeding)"
                         : "time per cell (its own and apportioned prefill, capture, extra pass, "
                           "selection, eviction, feed and decode, in ms)") +
                  (log_scale ? ", log scale" : "") +
                  "; one panel per protocol, full KV as a black star. The dashed staircase is "
                  "the Pareto front (circled points: no other point is at most as costly and at "
                  "least as accurate).";
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace kvaudit::reduce

// Hand-written SVG line chart (svg_plot.h). Coordinates: SVG user units (pixels), y down.
#include "svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace bench {

namespace {

constexpr double kWidth = 860, kHeight = 500;
constexpr double kLeft = 80, kRight = 24, kTop = 70, kBottom = 64;  // margins around the plot area
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

// A "nice" tick step (1, 2 or 5 × 10^k) giving about `ticks` intervals over `range`.
double nice_step(double range, int ticks) {
  const double raw = range / ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

std::string num(double v) { return fmt::format("{:g}", std::abs(v) < 1e-12 ? 0.0 : v); }

// One axis: data range → pixel range, linear or log10.
struct Axis {
  double lo = 0, hi = 1;  // data range (log: exponents)
  bool log = false;
  double px0 = 0, px1 = 1;  // pixels of lo and hi
  double map(double v) const {
    const double t = ((log ? std::log10(v) : v) - lo) / (hi - lo);
    return px0 + t * (px1 - px0);
  }
};

struct Range {
  double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
  bool empty() const { return !(min <= max); }
};

void tick_label(std::string& s, double x, double y, const char* anchor, const std::string& text) {
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">{}</text>\n", x, y, anchor, xml_escape(text));
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out.append("&amp;");
        break;
      case '<':
        out.append("&lt;");
        break;
      case '>':
        out.append("&gt;");
        break;
      case '"':
        out.append("&quot;");
        break;
      case '\'':
        out.append("&apos;");
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string plot(const std::string& title, const std::string& x_label, const std::string& y_label,
                 const std::vector<Series>& series) {
  Range xr, yr, ypos;  // ypos: positive y only (log scale)
  for (const Series& s : series)
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      xr.min = std::min(xr.min, x), xr.max = std::max(xr.max, x);
      yr.min = std::min(yr.min, y), yr.max = std::max(yr.max, y);
      if (y > 0) ypos.min = std::min(ypos.min, y), ypos.max = std::max(ypos.max, y);
    }
  if (xr.empty()) xr = {0, 1};
  if (yr.empty()) yr = {0, 1};
  if (xr.max == xr.min) xr = {xr.min - 1, xr.max + 1};

  Axis xa{xr.min, xr.max, false, kLeft, kLeft + kPlotW};
  Axis ya;
  ya.px0 = kTop + kPlotH, ya.px1 = kTop;
  ya.log = !ypos.empty() && ypos.max / ypos.min > 50;
  if (ya.log) {
    ya.lo = std::floor(std::log10(ypos.min));
    ya.hi = std::max(std::ceil(std::log10(ypos.max)), ya.lo + 1);
  } else {
    const double lo = std::min(0.0, yr.min), hi = yr.max > lo ? yr.max : lo + 1;
    const double step = nice_step(hi - lo, 6);
    ya.lo = std::floor(lo / step) * step;
    ya.hi = std::ceil(hi / step) * step;
  }

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      kWidth, kHeight);
  s += fmt::format("<text x=\"{:.1f}\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n", kWidth / 2,
                   xml_escape(title));

  // Gridlines, ticks and labels. y: every decade (minor lines at 2..9) or every nice step.
  s += "<g stroke=\"#dddddd\" stroke-width=\"1\">\n";
  std::string labels;
  auto hline = [&](double y, const char* colour) {
    s += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"/>\n", kLeft, y,
                     kLeft + kPlotW, y, colour);
  };
  if (ya.log) {
    for (auto e = static_cast<int>(ya.lo); e <= static_cast<int>(ya.hi); ++e) {
      const double v = std::pow(10.0, e);
      hline(ya.map(v), "#cccccc");
      tick_label(labels, kLeft - 8, ya.map(v) + 4, "end", num(v));
      if (e < static_cast<int>(ya.hi))
        for (int m = 2; m <= 9; ++m) hline(ya.map(m * v), "#eeeeee");
    }
  } else {
    const double step = nice_step(ya.hi - ya.lo, 6);
    for (double v = ya.lo; v <= ya.hi + step * 1e-9; v += step) {
      hline(ya.map(v), "#cccccc");
      tick_label(labels, kLeft - 8, ya.map(v) + 4, "end", num(v));
    }
  }
  const double xstep = nice_step(xr.max - xr.min, 8);
  for (double v = std::ceil(xr.min / xstep) * xstep; v <= xr.max + xstep * 1e-9; v += xstep) {
    const double x = xa.map(v);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\"/>\n", x, kTop, kTop + kPlotH);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"black\"/>\n", x,
                     kTop + kPlotH, kTop + kPlotH + 5);
    tick_label(labels, x, kTop + kPlotH + 19, "middle", num(v));
  }
  s += "</g>\n";
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", kLeft, kTop,
                   kPlotW, kPlotH);
  s += "<g fill=\"black\">\n" + labels + "</g>\n";
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", kLeft + kPlotW / 2,
                   kHeight - 18, xml_escape(x_label));
  s += fmt::format(
      "<text x=\"18\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {0:.1f})\">{1}</text>\n",
      kTop + kPlotH / 2, xml_escape(ya.log ? y_label + " (log scale)" : y_label));

  // The series: a polyline each (points off a log axis dropped), dots where asked.
  for (const Series& ser : series) {
    std::string pts, dots;
    for (const auto& [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (ya.log && y <= 0)) continue;
      pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", xa.map(x), ya.map(y));
      if (ser.markers) dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\"/>\n", xa.map(x), ya.map(y));
    }
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n",
                     xml_escape(ser.colour), pts);
    if (!dots.empty()) s += fmt::format("<g fill=\"{}\">\n{}</g>\n", xml_escape(ser.colour), dots);
  }

  // Legend: one row between the title and the plot area, a line (and dot) then the name.
  double lx = kLeft;
  for (const Series& ser : series) {
    const std::string c = xml_escape(ser.colour);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"52\" x2=\"{1:.1f}\" y2=\"52\" stroke=\"{2}\" stroke-width=\"2\"/>\n",
                     lx, lx + 20, c);
    if (ser.markers) s += fmt::format("<circle cx=\"{:.1f}\" cy=\"52\" r=\"3\" fill=\"{}\"/>\n", lx + 10, c);
    s += fmt::format("<text x=\"{:.1f}\" y=\"56\">{}</text>\n", lx + 26, xml_escape(ser.name));
    lx += 26 + 7.0 * static_cast<double>(ser.name.size()) + 24;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace bench

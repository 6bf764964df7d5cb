#pragma once
// A line chart as a standalone SVG document, hand-written (no dependencies): one polyline per
// series, optional point markers, axes with ticks, gridlines, a title and a legend. The y axis is
// logarithmic (decade gridlines) when the largest positive y is over 50× the smallest, linear
// otherwise.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench {

struct Series {
  std::string name;                               // legend text
  std::string colour;                             // any SVG colour: "#1f77b4", "red"
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in this order
  bool markers = false;                           // a dot at every point, as well as the line
};

// The SVG text (valid XML; every text escaped).
std::string plot(const std::string& title, const std::string& x_label, const std::string& y_label,
                 const std::vector<Series>& series);

// Escapes & < > " ' for XML text and attribute values.
std::string xml_escape(std::string_view text);

}  // namespace bench

#include "loom/train/loss_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>

namespace loom::train {
namespace {

// Plot area inside a 720 x 440 picture.
constexpr double kWidth = 720, kHeight = 440;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
constexpr size_t kMaxPoints = 1500;  // a longer training curve is thinned (every k-th step)

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string escape_xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// Tick values covering [lo, hi]: about five, at multiples of 1, 2 or 5 times a power of ten.
std::vector<double> ticks(double lo, double hi) {
  const double raw = (hi - lo) / 5;
  const double pow10 = std::pow(10.0, std::floor(std::log10(raw)));
  double step = pow10;
  for (double m : {2.0, 5.0, 10.0})
    if (step < raw) step = m * pow10;
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  return t;
}

std::vector<std::pair<int64_t, double>> finite(const std::vector<std::pair<int64_t, double>>& in) {
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& p : in)
    if (std::isfinite(p.second)) out.push_back(p);
  return out;
}

std::vector<std::pair<int64_t, double>> thin(const std::vector<std::pair<int64_t, double>>& in) {
  if (in.size() <= kMaxPoints) return in;
  const size_t every = (in.size() + kMaxPoints - 1) / kMaxPoints;
  std::vector<std::pair<int64_t, double>> out;
  for (size_t i = 0; i < in.size(); i += every) out.push_back(in[i]);
  if (out.back() != in.back()) out.push_back(in.back());
  return out;
}

}  // namespace

std::string loss_svg(const LossCurves& curves, const std::string& title) {
  const auto train = thin(finite(curves.train));
  const auto eval = finite(curves.eval);
  int64_t s0 = 0, s1 = 1;
  double y0 = INFINITY, y1 = -INFINITY;
  for (const auto* c : {&train, &eval})
    for (const auto& [s, v] : *c) {
      s1 = std::max(s1, s);
      y0 = std::min(y0, v);
      y1 = std::max(y1, v);
    }
  if (!(y0 <= y1)) y0 = 0, y1 = 1;  // nothing to plot yet
  if (y1 - y0 < 1e-9) y0 -= 0.5, y1 += 0.5;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  auto x_of = [&](double s) { return kLeft + (s - s0) / double(s1 - s0) * w; };
  auto y_of = [&](double v) { return kTop + (y1 - v) / (y1 - y0) * h; };

  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", kWidth) +
                    "\" height=\"" + fmt("%.0f", kHeight) +
                    "\" font-family=\"sans-serif\" font-size=\"12\">\n"
                    "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", kLeft) + "\" y=\"24\" font-size=\"14\">" + escape_xml(title) +
         "</text>\n";
  for (double v : ticks(y0, y1)) {
    const std::string y = fmt("%.1f", y_of(v));
    svg += "<line x1=\"" + fmt("%.0f", kLeft) + "\" x2=\"" + fmt("%.0f", kLeft + w) + "\" y1=\"" +
           y + "\" y2=\"" + y + "\" stroke=\"#e5e5e5\"/>\n";
    svg += "<text x=\"" + fmt("%.0f", kLeft - 6) + "\" y=\"" + y +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + fmt("%g", v) + "</text>\n";
  }
  for (double s : ticks(double(s0), double(s1))) {
    const std::string x = fmt("%.1f", x_of(s));
    svg += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + fmt("%.0f", kTop) + "\" y2=\"" +
           fmt("%.0f", kTop + h) + "\" stroke=\"#e5e5e5\"/>\n";
    svg += "<text x=\"" + x + "\" y=\"" + fmt("%.0f", kTop + h + 18) +
           "\" text-anchor=\"middle\">" + fmt("%g", s) + "</text>\n";
  }
  svg += "<rect x=\"" + fmt("%.0f", kLeft) + "\" y=\"" + fmt("%.0f", kTop) + "\" width=\"" +
         fmt("%.0f", w) + "\" height=\"" + fmt("%.0f", h) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  svg += "<text x=\"" + fmt("%.0f", kLeft + w / 2) + "\" y=\"" + fmt("%.0f", kHeight - 10) +
         "\" text-anchor=\"middle\">step</text>\n";
  svg += "<text transform=\"translate(18 " + fmt("%.0f", kTop + h / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">loss</text>\n";

  auto polyline = [&](const std::vector<std::pair<int64_t, double>>& c, const char* color,
                      const char* width) {
    if (c.empty()) return;
    svg += std::string("<polyline fill=\"none\" stroke=\"") + color + "\" stroke-width=\"" + width +
           "\" points=\"";
    for (const auto& [s, v] : c)
      svg += fmt("%.1f", x_of(double(s))) + "," + fmt("%.1f", y_of(v)) + " ";
    svg += "\"/>\n";
  };
  polyline(train, "#1f77b4", "1.2");
  polyline(eval, "#d62728", "2");
  for (const auto& [s, v] : eval)
    svg += "<circle cx=\"" + fmt("%.1f", x_of(double(s))) + "\" cy=\"" + fmt("%.1f", y_of(v)) +
           "\" r=\"3\" fill=\"#d62728\"/>\n";

  // Legend, top right.
  const double lx = kLeft + w - 130, ly = kTop + 16;
  svg += "<line x1=\"" + fmt("%.0f", lx) + "\" x2=\"" + fmt("%.0f", lx + 24) + "\" y1=\"" +
         fmt("%.0f", ly) + "\" y2=\"" + fmt("%.0f", ly) +
         "\" stroke=\"#1f77b4\" stroke-width=\"2\"/><text x=\"" + fmt("%.0f", lx + 30) + "\" y=\"" +
         fmt("%.0f", ly + 4) + "\">train loss</text>\n";
  svg += "<line x1=\"" + fmt("%.0f", lx) + "\" x2=\"" + fmt("%.0f", lx + 24) + "\" y1=\"" +
         fmt("%.0f", ly + 18) + "\" y2=\"" + fmt("%.0f", ly + 18) +
         "\" stroke=\"#d62728\" stroke-width=\"2\"/><text x=\"" + fmt("%.0f", lx + 30) + "\" y=\"" +
         fmt("%.0f", ly + 22) + "\">eval loss</text>\n";
  return svg + "</svg>\n";
}

LossCurves read_loss_curves(const std::string& metrics_path) {
  LossCurves c;
  std::ifstream in(metrics_path);
  const std::regex step_re("^\\{\"step\": ?([0-9]+)");
  const std::regex loss_re("\"loss\": ?([-+0-9.eE]+|nan|inf)");
  const std::regex eval_re("\"eval_loss\": ?([-+0-9.eE]+|nan|inf)");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch step, v;
    if (!std::regex_search(line, step, step_re)) continue;
    const int64_t s = std::stoll(step[1].str());
    if (std::regex_search(line, v, loss_re))
      c.train.push_back({s, std::strtod(v[1].str().c_str(), nullptr)});
    if (std::regex_search(line, v, eval_re))
      c.eval.push_back({s, std::strtod(v[1].str().c_str(), nullptr)});
  }
  return c;
}

}  // namespace loom::train

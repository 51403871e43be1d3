// SVG picture: one row per rank, x = unit-cost time, one rectangle per compute action.
// Hue per kind (F blue, B green, I orange, W purple); later loops (higher stages on the rank)
// are lighter. The micro-batch is written inside, with the stage when there is room.
#include <algorithm>
#include <cstdio>

#include "loom/schedule/io.h"
#include "loom/schedule/timing.h"

namespace loom::schedule {
namespace {

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

int hue(Kind k) {
  switch (k) {
    case Kind::F: return 212;
    case Kind::B: return 130;
    case Kind::I: return 28;
    default: return 275;
  }
}

double lightness(int loop, int loops) {
  return loops > 1 ? 36.0 + 36.0 * loop / (loops - 1) : 42.0;
}

std::string fill(Kind k, double light) {
  return "hsl(" + std::to_string(hue(k)) + ",62%," + num(light) + "%)";
}

}  // namespace

std::string render_svg(const Schedule& s) {
  return render_svg(s, time_schedule(s), "");
}

std::string render_svg(const Schedule& s, const Timing& timing, const std::string& unit_label) {
  const Shape& shape = s.shape;
  const double span = std::max(timing.makespan, 1.0);
  const double unit = unit_label.empty() ? std::clamp(1200.0 / span, 16.0, 40.0) : 1200.0 / span;
  const double left = 64, top = 64, row = 26, gap = 6;
  const double width = left + span * unit + 16;
  const double height = top + shape.pp * (row + gap) + 12;

  char title[256];
  std::snprintf(title, sizeof title,
                " pp=%d loops=%d microbatches=%d%s: makespan %s%s, bubble %.1f%%", shape.pp,
                shape.loops, shape.microbatches,
                shape.placement == Placement::V ? " placement=v" : "", num(timing.makespan).c_str(),
                unit_label.c_str(), 100.0 * timing.bubble_fraction());
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) +
                    "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " +
                    num(height) + "\" font-family=\"sans-serif\">\n";
  out += "<text x=\"8\" y=\"20\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(s.name) +
         xml_escape(title) + "</text>\n";

  // Legend: one swatch per kind, and the shading rule when there are several loops.
  double x = 8;
  const std::pair<Kind, const char*> legend[] = {{Kind::F, "F forward"},
                                                 {Kind::B, "B backward"},
                                                 {Kind::I, "I input grad"},
                                                 {Kind::W, "W weight grad"}};
  for (auto [kind, text] : legend) {
    out += "<rect class=\"legend\" x=\"" + num(x) +
           "\" y=\"32\" width=\"12\" height=\"12\" fill=\"" + fill(kind, 42) + "\"/>";
    out += "<text x=\"" + num(x + 16) + "\" y=\"43\" font-size=\"12\">" + text + "</text>\n";
    x += 120;
  }
  out += "<text x=\"" + num(x) +
         "\" y=\"43\" font-size=\"12\">label: micro-batch (stage:micro-batch" +
         std::string(shape.loops > 1 ? " when wide); lighter = later loop" : " when wide)") +
         "</text>\n";

  for (int r = 0; r < shape.pp; ++r) {
    const double y = top + r * (row + gap);
    out += "<text x=\"8\" y=\"" + num(y + row * 0.65) + "\" font-size=\"12\">rank " +
           std::to_string(r) + "</text>";
    out += "<rect class=\"idle\" x=\"" + num(left) + "\" y=\"" + num(y) + "\" width=\"" +
           num(span * unit) + "\" height=\"" + num(row) + "\" fill=\"#eeeeee\"/>\n";
    for (const TimedAction& t : timing.ranks[r]) {
      const Action& a = t.action;
      const double light = lightness(a.stage / shape.pp, shape.loops);
      const double w = (t.end - t.start) * unit;
      const double ax = left + t.start * unit;
      out += "<rect class=\"action\" x=\"" + num(ax) + "\" y=\"" + num(y) + "\" width=\"" + num(w) +
             "\" height=\"" + num(row) + "\" fill=\"" + fill(a.kind, light) +
             "\" stroke=\"#ffffff\" stroke-width=\"1\"><title>" + to_string(a) + ": stage " +
             std::to_string(a.stage) + " " + std::string(kind_name(a.kind)) + " micro-batch " +
             std::to_string(a.microbatch) + ", t=" + num(t.start) + ".." + num(t.end) +
             "</title></rect>";
      std::string label = std::to_string(a.stage) + ":" + std::to_string(a.microbatch);
      if (w < 6.5 * label.size() + 4) label = std::to_string(a.microbatch);
      // Shrink the font so that two-digit micro-batches fit in one narrow unit.
      const double font = std::clamp((w - 2) / (0.62 * label.size() + 0.4), 7.0, 10.0);
      out += "<text x=\"" + num(ax + w / 2) + "\" y=\"" + num(y + row * 0.65) + "\" font-size=\"" +
             num(font) + "\" text-anchor=\"middle\" fill=\"" +
             (light < 55 ? "#ffffff" : "#111111") + "\">" + label + "</text>\n";
    }
  }
  out += "</svg>";
  return out;
}

}  // namespace loom::schedule

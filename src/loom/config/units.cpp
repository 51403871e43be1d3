// parse_bandwidth and parse_duration: a number followed by an optional unit.
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "loom/common/error.h"
#include "loom/config/config.h"
#include "loom/config/text.h"

namespace loom::config {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits "125 MB/s" into 125 and "mb/s". False when there is no leading number. The number
// must start with a digit or '.', which keeps out signs, "inf" and "nan".
bool split_number(std::string_view text, double& number, std::string& unit) {
  text = trim(text);
  if (text.empty() || !((text[0] >= '0' && text[0] <= '9') || text[0] == '.')) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || !std::isfinite(number)) return false;
  unit = text::lower(trim(text.substr(static_cast<size_t>(end - text.data()))));
  return true;
}

}  // namespace

double parse_bandwidth(const std::string& text) {
  double number = 0;
  std::string unit;
  bool ok = split_number(text, number, unit);
  double factor = 0;
  if (ok && unit.empty()) {
    factor = 1;  // bare number: bytes per second
  } else if (ok) {
    // Units are case-insensitive, so "b" cannot tell bits from bytes: bits are spelled
    // bit/bits/bps ("1Gbps" is a gigabit), bytes need "/s" ("125MB/s").
    static const std::pair<std::string_view, double> prefixes[] = {
        {"ki", 1024.0}, {"mi", 1048576.0}, {"gi", 1073741824.0}, {"ti", 1099511627776.0},
        {"k", 1e3},     {"m", 1e6},        {"g", 1e9},           {"t", 1e12},
        {"", 1.0}};
    static const std::pair<std::string_view, double> suffixes[] = {
        {"bit", 0.125}, {"bits", 0.125}, {"bit/s", 0.125}, {"bits/s", 0.125},
        {"bps", 0.125}, {"b/s", 1.0},    {"byte/s", 1.0},  {"bytes/s", 1.0}};
    for (const auto& [prefix, scale] : prefixes) {
      if (unit.compare(0, prefix.size(), prefix) != 0) continue;
      std::string_view rest = std::string_view(unit).substr(prefix.size());
      for (const auto& [suffix, per_byte] : suffixes) {
        if (rest == suffix) factor = scale * per_byte;
      }
      if (factor != 0) break;
    }
  }
  double value = number * factor;
  if (!ok || factor == 0 || !(value > 0) || !std::isfinite(value)) {
    LOOM_USAGE("bandwidth ", text::quote(text),
               " is not understood; use a positive number "
               "with a unit such as 1Gbit, 100Mbit, 1Gbps or 125MB/s (a bare number is bytes/s)");
  }
  return value;
}

double parse_duration(const std::string& text) {
  double number = 0;
  std::string unit;
  bool ok = split_number(text, number, unit);
  double factor = 0;
  if (ok) {
    // "\u00b5s" is the micro sign, "\u03bcs" the Greek mu; both are seen in the wild.
    static const std::pair<std::string_view, double> units[] = {
        {"", 1.0},         {"s", 1.0},        {"ms", 1e-3}, {"us", 1e-6},
        {"\u00b5s", 1e-6}, {"\u03bcs", 1e-6}, {"ns", 1e-9}};
    for (const auto& [name, scale] : units) {
      if (unit == name) factor = scale;
    }
  }
  if (!ok || factor == 0) {
    LOOM_USAGE("duration ", text::quote(text),
               " is not understood; use a non-negative "
               "number with a unit such as 50us, 1ms or 0.5s (a bare number is seconds)");
  }
  return number * factor;
}

}  // namespace loom::config

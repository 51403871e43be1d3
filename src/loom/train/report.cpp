#include "loom/train/report.h"

#include <unistd.h>

#include <cmath>
#include <sstream>

namespace loom::train {

void JsonLine::key(const std::string& k) {
  if (!body_.empty()) body_ += ", ";
  body_ += "\"" + k + "\": ";
}

JsonLine& JsonLine::num(const std::string& k, double v) {
  key(k);
  if (!std::isfinite(v)) {
    body_ += "null";
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    body_ += buf;
  }
  return *this;
}

JsonLine& JsonLine::integer(const std::string& k, long long v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}

JsonLine& JsonLine::str(const std::string& k, const std::string& v) {
  key(k);
  std::string e;
  for (char c : v) {
    if (c == '"' || c == '\\') e += '\\';
    e += c;
  }
  body_ += "\"" + e + "\"";
  return *this;
}

std::string human_count(double v) {
  char buf[32];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.2f %s" : "%.0f %s", b, units[u]);
  return buf;
}

std::string human_time(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = std::lround(s);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

Progress::Progress(long total, bool enabled, std::string unit)
    : total_(total), tty_(::isatty(2)), enabled_(enabled), unit_(std::move(unit)) {}

void Progress::update(long step, double loss, double rate, double elapsed) {
  if (!enabled_) return;
  double frac = total_ > 0 ? double(step) / total_ : 1.0;
  double eta = frac > 0 ? elapsed * (1 - frac) / frac : NAN;
  char line[256];
  if (tty_) {
    int width = 24, filled = static_cast<int>(frac * width);
    std::string bar(filled, '#');
    bar += std::string(width - filled, '.');
    std::snprintf(line, sizeof line, "\r[%s] step %ld/%ld  loss %.4f  %s %s/s  ETA %s   ",
                  bar.c_str(), step, total_, loss, human_count(rate).c_str(), unit_.c_str(),
                  human_time(eta).c_str());
    std::fputs(line, stderr);
    std::fflush(stderr);
  } else {
    // Not a terminal (CI, pipes): one line about every 10% of the run.
    long every = std::max(1L, total_ / 10);
    if (step == total_ || step / every != last_printed_ / every || last_printed_ < 0) {
      std::snprintf(line, sizeof line, "step %ld/%ld  loss %.4f  %s %s/s  ETA %s\n", step, total_,
                    loss, human_count(rate).c_str(), unit_.c_str(), human_time(eta).c_str());
      std::fputs(line, stderr);
      last_printed_ = step;
    }
  }
}

void Progress::message(const std::string& line) {
  if (tty_ && enabled_) std::fputs("\r\033[K", stderr);
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Progress::finish() {
  if (tty_ && enabled_) std::fputs("\n", stderr);
}

std::string summary_table(const std::string& title,
                          const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t w = 0;
  for (auto& [k, v] : rows) w = std::max(w, k.size());
  std::ostringstream os;
  os << title << "\n" << std::string(title.size(), '-') << "\n";
  for (auto& [k, v] : rows) os << "  " << k << std::string(w - k.size() + 2, ' ') << v << "\n";
  return os.str();
}

}  // namespace loom::train

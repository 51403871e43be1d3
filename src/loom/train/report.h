#pragma once
// What rank 0 shows and writes: a progress line on a terminal, one JSON object per step in
// metrics.jsonl, and a summary table at the end.
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace loom::train {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class JsonLine {
 public:
  JsonLine& num(const std::string& k, double v);
  JsonLine& integer(const std::string& k, long long v);
  JsonLine& str(const std::string& k, const std::string& v);
  std::string done() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

class Progress {
 public:
  Progress(long total_steps, bool enabled, std::string unit);
  void update(long step, double loss, double items_per_s, double elapsed_s);
  void message(const std::string& line);  // printed above the bar
  void finish();

 private:
  long total_;
  bool tty_;
  bool enabled_;
  std::string unit_;
  long last_printed_ = -1;
};

// Two-column table with a title, like:  throughput ....... 12.3k tokens/s
std::string summary_table(const std::string& title,
                          const std::vector<std::pair<std::string, std::string>>& rows);
std::string human_count(double v);      // 12.3k, 4.5M
std::string human_bytes(double bytes);  // 1.2 MiB
std::string human_time(double s);       // 1m23s

}  // namespace loom::train

#include "loom/common/text.h"

#include <algorithm>
#include <cstdio>

namespace loom::text {

std::string escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    auto u = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string quote(std::string_view s, char q) {
  return q + escape(s) + q;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return out;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  // Three rows suffice: the transposition case looks two rows back.
  std::vector<size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::string closest(std::string_view word, const std::vector<std::string>& candidates) {
  // Short words get little slack, otherwise "dp" would "correct" to any two-letter name.
  const size_t limit = word.size() <= 3 ? 1 : std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(lower(word), lower(c));
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  if (!best.empty() || word.size() < 3) return best;
  for (const auto& c : candidates) {
    if (c.find(word) != std::string::npos || (c.size() >= 3 && word.find(c) != word.npos)) {
      return c;
    }
  }
  return "";
}

std::string alternatives(const std::vector<std::string>& guesses, const std::string& prefix) {
  std::string out;
  for (size_t i = 0; i < guesses.size(); ++i)
    out += (i ? " or '" : "'") + prefix + guesses[i] + "'";
  return out;
}

}  // namespace loom::text

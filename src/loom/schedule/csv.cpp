// CSV import/export (format in io.h and docs/schedules.md).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "loom/common/error.h"
#include "loom/schedule/io.h"

namespace loom::schedule {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

// Parses "# pp=2 loops=1 microbatches=4 name=1f1b" (and an optional placement=v|looping)
// into shape and name.
void parse_header(std::string_view text, int line_no, Shape* shape, std::string* name,
                  bool* have_shape) {
  std::istringstream in{std::string(text.substr(1))};
  std::string item;
  bool seen[3] = {false, false, false};
  while (in >> item) {
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      LOOM_USAGE("schedule CSV line ", line_no, ": bad header item '", item,
                 "'; expected key=value with keys pp, loops, microbatches, name, placement");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "name") {
      *name = value;
      continue;
    }
    if (key == "placement") {
      std::optional<Placement> p = parse_placement(value);
      if (!p)
        LOOM_USAGE("schedule CSV line ", line_no, ": header placement='", value,
                   "' is unknown; use placement=looping or placement=v");
      shape->placement = *p;
      continue;
    }
    int* target = key == "pp"             ? &shape->pp
                  : key == "loops"        ? &shape->loops
                  : key == "microbatches" ? &shape->microbatches
                                          : nullptr;
    if (!target)
      LOOM_USAGE("schedule CSV line ", line_no, ": unknown header key '", key,
                 "'; expected pp, loops, microbatches, name or placement");
    bool digits = value.size() <= 9 && std::all_of(value.begin(), value.end(),
                                                   [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoi(value) < 1)
      LOOM_USAGE("schedule CSV line ", line_no, ": header ", key, "='", value,
                 "' must be a positive integer");
    *target = std::stoi(value);
    seen[key == "pp" ? 0 : key == "loops" ? 1 : 2] = true;
  }
  if (!seen[0] || !seen[1] || !seen[2])
    LOOM_USAGE("schedule CSV line ", line_no,
               ": header must give pp, loops and microbatches, e.g. "
               "'# pp=2 loops=1 microbatches=4 name=custom'");
  *have_shape = true;
}

}  // namespace

std::string to_csv(const Schedule& s) {
  std::string out = "# pp=" + std::to_string(s.shape.pp) +
                    " loops=" + std::to_string(s.shape.loops) +
                    " microbatches=" + std::to_string(s.shape.microbatches);
  // Looping is the default: its files stay as they were before placements existed.
  if (s.shape.placement != Placement::Looping)
    out += " placement=" + std::string(placement_name(s.shape.placement));
  if (!s.name.empty()) {
    std::string name = s.name;  // the header is space-separated
    std::replace_if(
        name.begin(), name.end(), [](char c) { return c == ' ' || c == '\t'; }, '_');
    out += " name=" + name;
  }
  out += "\n";
  for (const auto& list : s.ranks) {
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) out += ',';
      out += to_string(list[i]);
    }
    out += "\n";
  }
  return out;
}

Schedule from_csv(const std::string& text) {
  Schedule s;
  s.name = "custom";
  bool have_shape = false;
  int line_no = 0;
  std::istringstream in(text);
  std::string raw;
  while (std::getline(in, raw)) {
    ++line_no;
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (line.front() == '#') {
      // A '#' line with key=value items before the first rank line is the header; other '#'
      // lines are comments.
      if (s.ranks.empty() && !have_shape && line.find('=') != std::string_view::npos)
        parse_header(line, line_no, &s.shape, &s.name, &have_shape);
      continue;
    }
    std::vector<Action>& list = s.ranks.emplace_back();
    size_t item = 0;
    while (true) {
      size_t comma = line.find(',');
      std::string_view token = trim(line.substr(0, comma));
      ++item;
      if (token.empty())
        LOOM_USAGE("schedule CSV line ", line_no, " item ", item, ": empty action (stray comma?)");
      try {
        list.push_back(parse_action(token));
      } catch (const UsageError& e) {
        LOOM_USAGE("schedule CSV line ", line_no, " item ", item, ": ", e.what());
      }
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
    }
  }
  if (s.ranks.empty()) LOOM_USAGE("schedule CSV has no rank lines");
  if (have_shape) {
    if (static_cast<int>(s.ranks.size()) != s.shape.pp)
      LOOM_USAGE("schedule CSV header says pp=", s.shape.pp, " but has ", s.ranks.size(),
                 " rank lines");
    return s;
  }
  // No header: infer the shape from the actions.
  int max_stage = 0, max_mb = 0;
  for (const auto& list : s.ranks)
    for (const Action& a : list) {
      max_stage = std::max(max_stage, a.stage);
      max_mb = std::max(max_mb, a.microbatch);
    }
  s.shape.pp = static_cast<int>(s.ranks.size());
  s.shape.loops = (max_stage + 1 + s.shape.pp - 1) / s.shape.pp;
  s.shape.microbatches = max_mb + 1;
  // Looping unless some action is off its looping rank and every one is on its V rank.
  auto fits = [&](Placement p) {
    Shape shape = s.shape;
    shape.placement = p;
    for (size_t r = 0; r < s.ranks.size(); ++r)
      for (const Action& a : s.ranks[r])
        if (shape.rank_of(a.stage) != static_cast<int>(r)) return false;
    return true;
  };
  if (!fits(Placement::Looping) && fits(Placement::V)) s.shape.placement = Placement::V;
  return s;
}

Schedule load_csv(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    LOOM_USAGE("schedule file '", path, "' is a folder; pass a CSV file (loom schedule --help)");
  std::ifstream file(path);
  if (!file) LOOM_USAGE("cannot read schedule file '", path, "': ", std::strerror(errno));
  std::stringstream buf;
  buf << file.rdbuf();
  try {
    return from_csv(buf.str());
  } catch (const UsageError& e) {
    LOOM_USAGE(path, ": ", e.what());
  }
}

}  // namespace loom::schedule

#include "loom/schedule/io.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "loom/common/error.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/lower.h"
#include "loom/schedule/timing.h"
#include "test_util.h"

namespace loom::schedule {
namespace {

using test_util::count_compute;
using test_util::count_text;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

void expect_same(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.shape.pp, b.shape.pp);
  EXPECT_EQ(a.shape.loops, b.shape.loops);
  EXPECT_EQ(a.shape.placement, b.shape.placement);
  EXPECT_EQ(a.shape.microbatches, b.shape.microbatches);
  EXPECT_EQ(a.ranks, b.ranks);
}

// Golden files, checked by hand against the papers' pictures (see docs/schedules.md).
TEST(Csv, Golden) {
  const struct {
    const char* file;
    const char* name;
    Shape shape;
  } cases[] = {{"1f1b_pp2_m4.csv", "1f1b", {2, 1, 4}},
               {"interleaved_pp2_v2_m4.csv", "interleaved", {2, 2, 4}},
               {"bfs_pp2_v2_m4.csv", "bfs", {2, 2, 4}},
               {"zb-h1_pp2_m4.csv", "zb-h1", {2, 1, 4}},
               {"zbv_pp2_v2_m4.csv", "zbv", {2, 2, 4}},
               {"dualpipev_pp2_v2_m5.csv", "dualpipev", {2, 2, 5}}};
  for (const auto& c : cases) {
    const std::string path = std::string(LOOM_SCHEDULE_GOLDEN_DIR) + "/" + c.file;
    const std::string golden = read_file(path);
    ASSERT_FALSE(golden.empty()) << "cannot read " << path;
    EXPECT_EQ(to_csv(generate(c.name, c.shape)), golden) << c.file;
    expect_same(load_csv(path), generate(c.name, c.shape));
  }
}

TEST(Csv, RoundTrip) {
  for (const std::string& name : generator_names())
    for (Shape shape : {Shape{1, 1, 1}, Shape{3, 1, 6}, Shape{2, 3, 4}, Shape{4, 2, 8}}) {
      if (!unsupported_reason(name, shape).empty()) continue;
      const Schedule s = generate(name, shape);
      expect_same(from_csv(to_csv(s)), s);
      const Schedule low = lower(s, {DpMode::ZeroParams, true, 2});
      expect_same(from_csv(to_csv(low)), low);
      EXPECT_EQ(to_csv(from_csv(to_csv(low))), to_csv(low));
    }
}

TEST(Csv, Format) {
  Schedule s = generate("1f1b", {2, 1, 2});
  EXPECT_EQ(to_csv(s),
            "# pp=2 loops=1 microbatches=2 name=1f1b\n"
            "0F0,0F1,0B0,0B1\n"
            "1F0,1B0,1F1,1B1\n");
}

TEST(Csv, InfersShapeWithoutHeader) {
  const Schedule s =
      from_csv("0F0, 0F1,2F0,2F1,2B0,2B1,0B0,0B1\n\n1F0,1F1,3F0,3F1,3B0,3B1,1B0,1B1\n");
  EXPECT_EQ(s.name, "custom");
  EXPECT_EQ(s.shape.pp, 2);
  EXPECT_EQ(s.shape.loops, 2);
  EXPECT_EQ(s.shape.microbatches, 2);
  EXPECT_EQ(to_string(s.ranks[0][1]), "0F1");
  // Comments and CRLF line ends are fine.
  const Schedule t = from_csv("# hand-written\r\n0F0,0B0\r\n# done\r\n");
  EXPECT_EQ(t.shape.pp, 1);
  EXPECT_EQ(t.ranks[0].size(), 2u);
}

// V placement: the header says placement=v (looping files keep their old header); without a
// header, lists that fit V placement only read as V.
TEST(Csv, VPlacement) {
  const Schedule s = generate("zbv", {2, 2, 2});
  const std::string text = to_csv(s);
  EXPECT_EQ(text.substr(0, text.find('\n')), "# pp=2 loops=2 microbatches=2 placement=v name=zbv");
  expect_same(from_csv(text), s);
  EXPECT_EQ(from_csv(text.substr(text.find('\n') + 1)).shape.placement, Placement::V);
  EXPECT_EQ(from_csv("0F0,3F0,3B0,0B0\n1F0,2F0,2B0,1B0\n").shape.placement, Placement::V);
  EXPECT_EQ(from_csv("0F0,2F0,2B0,0B0\n1F0,3F0,3B0,1B0\n").shape.placement, Placement::Looping);
  EXPECT_EQ(from_csv("# pp=2 loops=2 microbatches=1 placement=looping\n0F0\n1F0\n").shape.placement,
            Placement::Looping);
  EXPECT_EQ(to_csv(generate("bfs", {2, 2, 2})).find("placement"), std::string::npos);
}

TEST(Csv, BadTextGivesOneLineErrors) {
  const struct {
    const char* text;
    const char* want;  // part of the message
  } cases[] = {
      {"# pp=2 loops=1 microbatches=1\n0F0,0B0\n1F0,XB0\n", "line 3 item 2: bad action 'XB0'"},
      {"0F0,,0B0\n", "line 1 item 2: empty action"},
      {"0F0,0B0,\n", "line 1 item 3: empty action"},
      {"0F0,0Q0\n", "line 1 item 2: bad action '0Q0'"},
      {"0F\n", "'0F'"},
      {"0UNSHARD2\n", "'0UNSHARD2'"},
      {"# pp=2 loops=1 microbatches=1\n0F0,0B0\n", "says pp=2 but has 1 rank lines"},
      {"# pp=2 loops=1 stages=3\n", "line 1: unknown header key 'stages'"},
      {"# pp=x loops=1 microbatches=1\n", "header pp='x' must be a positive integer"},
      {"# pp=0 loops=1 microbatches=1\n", "header pp='0'"},
      {"# pp=1 loops=1\n0F0\n", "header must give pp, loops and microbatches"},
      {"# pp=1 loops=2 microbatches=1 placement=w\n0F0\n", "use placement=looping or placement=v"},
      {"", "no rank lines"},
  };
  for (const auto& c : cases) {
    try {
      from_csv(c.text);
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const UsageError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(c.want), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(load_csv("/nonexistent/loom/schedule.csv"), UsageError);
}

// A small XML checker: tags nest and close, attribute values are quoted, text has no raw '<'.
bool well_formed(const std::string& xml, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] != '<') {
      if (xml[i] == '&') {
        size_t semi = xml.find(';', i);
        if (semi == std::string::npos || semi - i > 6) return *why = "bare &", false;
      }
      ++i;
      continue;
    }
    size_t close = xml.find('>', i);
    if (close == std::string::npos) return *why = "unclosed tag", false;
    std::string tag = xml.substr(i + 1, close - i - 1);
    if (count_text(tag, "\"") % 2 != 0 || tag.find('<') != std::string::npos)
      return *why = "bad tag " + tag, false;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return *why = "mismatched " + tag, false;
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
    i = close + 1;
  }
  if (!open.empty()) return *why = "unclosed " + open.back(), false;
  return true;
}

TEST(Render, Svg) {
  for (const Schedule& s : {generate("bfs", {8, 4, 16}), generate("zb-h1", {4, 1, 8}),
                            lower(generate("interleaved", {2, 2, 4}))}) {
    const std::string svg = render_svg(s);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_EQ(svg.substr(svg.size() - 6), "</svg>");
    EXPECT_EQ(count_text(svg, "class=\"action\""), count_compute(s));
    std::string why;
    EXPECT_TRUE(well_formed(svg, &why)) << why;
    EXPECT_NE(svg.find("pp=" + std::to_string(s.shape.pp)), std::string::npos);
    EXPECT_NE(svg.find("bubble"), std::string::npos);
  }
  Schedule odd = generate("1f1b", {2, 1, 2});
  odd.name = "a<b&\"c\"";
  std::string why;
  EXPECT_TRUE(well_formed(render_svg(odd), &why)) << why;
}

TEST(Render, Trace) {
  const Schedule s = lower(generate("zb-h1", {3, 1, 4}));
  const std::string json = render_trace(s);
  EXPECT_EQ(json.rfind("{\"traceEvents\":[", 0), 0u);
  EXPECT_EQ(count_text(json, "\"ph\":\"X\""), count_compute(s));
  EXPECT_NE(json.find("{\"name\":\"2I0\",\"cat\":\"I\",\"ph\":\"X\",\"ts\":"), std::string::npos);
  EXPECT_NE(json.find("\"tid\":2"), std::string::npos);
  // Balanced brackets outside strings.
  int depth = 0;
  bool in_string = false;
  for (char c : json) {
    if (c == '"') in_string = !in_string;
    if (in_string) continue;
    depth += (c == '{' || c == '[') - (c == '}' || c == ']');
    EXPECT_GE(depth, 0);
  }
  EXPECT_EQ(depth, 0);
  // 1F0 on rank 1 starts after 0F0: one unit = 1000 us.
  EXPECT_NE(json.find("{\"name\":\"1F0\",\"cat\":\"F\",\"ph\":\"X\",\"ts\":1000,\"dur\":1000,"
                      "\"pid\":0,\"tid\":1"),
            std::string::npos)
      << json;
}

TEST(Render, Ascii) {
  EXPECT_EQ(render_ascii(generate("1f1b", {2, 1, 2})),
            "1f1b pp=2 loops=1 microbatches=2: makespan 9, bubble 33.3%\n"
            "rank 0 | 0F0 0F1 .   .   0B0---- .   0B1----\n"
            "rank 1 | .   1F0 1B0---- 1F1 1B1---- .   .\n");
  // Lowered actions take no time and are not shown.
  EXPECT_EQ(render_ascii(lower(generate("bfs", {2, 2, 4}), {DpMode::ZeroParams})),
            render_ascii(generate("bfs", {2, 2, 4})));
}

}  // namespace
}  // namespace loom::schedule

#include "loom/trace/chrome_trace.h"

#include <gtest/gtest.h>

#include "loom/common/error.h"

using namespace loom;

namespace {

TEST(ChromeTrace, OneEventPerLine) {
  trace::ChromeTrace t;
  t.process_name(0, "run \"a\"");
  t.thread_name(0, 1, "rank 1");
  t.complete({"1F0", "F", 1000, 250.5}, 0, 1, {{"stage", 1}, {"microbatch", 0}});
  t.complete({"wait:1B0", "wait", 12.34, 3}, 2, 0);
  EXPECT_EQ(
      t.json(),
      "{\"traceEvents\":[\n"
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"run \\\"a\\\"\"}},\n"
      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"rank "
      "1\"}},\n"
      "{\"name\":\"1F0\",\"cat\":\"F\",\"ph\":\"X\",\"ts\":1000,\"dur\":250.5,\"pid\":0,\"tid\":1,"
      "\"args\":{\"stage\":1,\"microbatch\":0}},\n"
      "{\"name\":\"wait:1B0\",\"cat\":\"wait\",\"ph\":\"X\",\"ts\":12.3,\"dur\":3,\"pid\":2,"
      "\"tid\":0}\n"
      "]}\n");
}

TEST(ChromeTrace, EmptyTraceIsValid) {
  EXPECT_EQ(trace::ChromeTrace().json(), "{\"traceEvents\":[\n]}\n");
}

TEST(ChromeTrace, EscapesNames) {
  EXPECT_EQ(trace::json_string("a\"b\\c\nd"), "\"a\\\"b\\\\c d\"");
}

TEST(ChromeTrace, PackRoundTrips) {
  std::vector<trace::Event> events = {
      {"0F0", "F", 1.5, 2.25}, {"", "", -3, 0}, {"wait:dp:1B3", "dp_wait", 1e9, 0.125}};
  std::vector<trace::Event> back = trace::unpack(trace::pack(events));
  ASSERT_EQ(back.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(back[i].name, events[i].name);
    EXPECT_EQ(back[i].cat, events[i].cat);
    EXPECT_EQ(back[i].start_us, events[i].start_us);
    EXPECT_EQ(back[i].dur_us, events[i].dur_us);
  }
  EXPECT_TRUE(trace::unpack("").empty());
}

TEST(ChromeTrace, TruncatedBufferThrows) {
  std::string bytes = trace::pack({{"0F0", "F", 1, 2}});
  EXPECT_THROW(trace::unpack(bytes.substr(0, bytes.size() - 1)), Error);
  EXPECT_THROW(trace::unpack(bytes.substr(0, 2)), Error);
}

}  // namespace

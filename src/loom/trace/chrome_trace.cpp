#include "loom/trace/chrome_trace.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "loom/common/error.h"

namespace loom::trace {
namespace {

std::string number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

template <typename T>
void put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T get(const std::string& in, size_t* at) {
  if (*at + sizeof(T) > in.size()) throw Error("truncated trace buffer");
  T v;
  std::memcpy(&v, in.data() + *at, sizeof v);
  *at += sizeof v;
  return v;
}

std::string get_string(const std::string& in, size_t* at) {
  const auto n = get<uint32_t>(in, at);
  if (*at + n > in.size()) throw Error("truncated trace buffer");
  std::string s = in.substr(*at, n);
  *at += n;
  return s;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void ChromeTrace::process_name(int pid, const std::string& name) {
  lines_.push_back("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                   ",\"args\":{\"name\":" + json_string(name) + "}}");
}

void ChromeTrace::thread_name(int pid, int tid, const std::string& name) {
  lines_.push_back("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                   ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":" + json_string(name) +
                   "}}");
}

void ChromeTrace::complete(const Event& e, int pid, int tid,
                           const std::vector<std::pair<std::string, int64_t>>& args) {
  std::string line = "{\"name\":" + json_string(e.name) + ",\"cat\":" + json_string(e.cat) +
                     ",\"ph\":\"X\",\"ts\":" + number(e.start_us) + ",\"dur\":" + number(e.dur_us) +
                     ",\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid);
  if (!args.empty()) {
    line += ",\"args\":{";
    for (size_t i = 0; i < args.size(); ++i)
      line += (i ? "," : "") + json_string(args[i].first) + ":" + std::to_string(args[i].second);
    line += "}";
  }
  lines_.push_back(line + "}");
}

std::string ChromeTrace::json() const {
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < lines_.size(); ++i)
    out += lines_[i] + (i + 1 < lines_.size() ? ",\n" : "\n");
  return out + "]}\n";
}

std::string pack(const std::vector<Event>& events) {
  std::string out;
  for (const Event& e : events) {
    put(&out, static_cast<uint32_t>(e.name.size()));
    out += e.name;
    put(&out, static_cast<uint32_t>(e.cat.size()));
    out += e.cat;
    put(&out, e.start_us);
    put(&out, e.dur_us);
  }
  return out;
}

std::vector<Event> unpack(const std::string& bytes) {
  std::vector<Event> out;
  size_t at = 0;
  while (at < bytes.size()) {
    Event e;
    e.name = get_string(bytes, &at);
    e.cat = get_string(bytes, &at);
    e.start_us = get<double>(bytes, &at);
    e.dur_us = get<double>(bytes, &at);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace loom::trace

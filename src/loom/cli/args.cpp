#include "loom/cli/args.h"

#include <algorithm>

#include "loom/common/error.h"

namespace loom::cli {

Args take_flags(const std::vector<std::string>& args, const std::vector<std::string>& known,
                const std::vector<std::string>& switches) {
  Args out;
  auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      out.rest.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (has(switches, name)) {
      out.flags[name] = inline_value ? value : "true";
    } else if (has(known, name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) LOOM_USAGE("flag --", name, " needs a value");
        value = args[++i];
      }
      out.flags[name] = value;
    } else {
      out.rest.push_back(a);
      if (!inline_value && i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0)
        out.rest.push_back(args[++i]);
    }
  }
  return out;
}

int to_int(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    LOOM_USAGE("--", flag, " must be an integer in [", lo, ", ", hi, "], got '", v, "'");
  return static_cast<int>(x);
}

}  // namespace loom::cli

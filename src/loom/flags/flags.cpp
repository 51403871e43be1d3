#include "loom/flags/flags.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "loom/common/error.h"
#include "loom/common/text.h"

namespace loom::flags {
namespace {

// '_' reads as '-', so that --seq_len and --seq-len are one flag.
std::string normalize(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// The next argument cannot be a value: it is a flag (a value starting with "--" needs the
// --name=value form) or the request for help.
bool flag_like(const std::string& arg) {
  return arg.rfind("--", 0) == 0 || arg == "-h";
}

std::string unknown_flag(const std::string& spelled, const Spec& spec, const std::string& where) {
  std::vector<std::string> visible;
  for (const Flag& f : spec.flags)
    if (!f.hidden) visible.push_back(f.name);
  std::vector<std::string> guesses;
  if (std::string near = text::closest(normalize(spelled), visible); !near.empty())
    guesses = {near};
  else if (spec.source)
    guesses = spec.source->suggest(spelled);
  std::string msg = "unknown flag " + text::quote("--" + spelled) + where;
  if (guesses.empty())
    return msg + "; see " + (spec.command.empty() ? "" : "loom " + spec.command + " ") + "--help";
  return msg + "; did you mean " + text::alternatives(guesses, "--") + "?";
}

}  // namespace

bool Parsed::has(const std::string& name) const {
  return std::any_of(items.begin(), items.end(), [&](const Item& i) { return i.name == name; });
}

std::string Parsed::get(const std::string& name, const std::string& fallback) const {
  for (auto it = items.rbegin(); it != items.rend(); ++it)
    if (it->name == name) return it->value;
  return fallback;
}

Parsed parse(const std::vector<std::string>& args, const Spec& spec) {
  Parsed out;
  // The first problem is reported, but only after every flag was seen: -h anywhere wins.
  std::string problem;
  auto fail = [&](const std::string& msg) {
    if (problem.empty()) problem = msg;
  };
  const std::string where = spec.command.empty() ? "" : " for loom " + spec.command;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      out.help = true;
      continue;
    }
    if (spec.stop_at_word && arg == "--") {
      ++i;
      break;
    }
    if (arg.size() <= 2 || arg.rfind("--", 0) != 0) {
      if (spec.stop_at_word) break;
      fail("unexpected argument " + text::quote(arg) + where +
           "; flags look like --name value or --name=value");
      continue;
    }
    std::string spelled = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = spelled.find('='); eq != std::string::npos) {
      value = spelled.substr(eq + 1);
      spelled.resize(eq);
    }
    std::optional<Flag> flag;
    bool from_source = false;
    const std::string name = normalize(spelled);
    for (const Flag& f : spec.flags)
      if (f.name == name) flag = f;
    if (!flag && spec.source) {
      try {
        flag = spec.source->find(spelled);
        from_source = true;
      } catch (const UsageError& e) {
        fail(e.what());
        continue;
      }
    }
    if (!flag) {
      fail(unknown_flag(spelled, spec, where));
      continue;
    }
    if (flag->example.empty()) {
      if (value)
        fail("flag --" + text::escape(spelled) +
             " takes no value; drop the '=" + text::escape(*value) + "'");
      out.items.push_back({flag->name, "", spelled, from_source});
      continue;
    }
    if (!value && flag->boolean && (i + 1 >= args.size() || flag_like(args[i + 1]))) {
      out.items.push_back({flag->name, "true", spelled, from_source});
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size() || flag_like(args[i + 1])) {
        fail("flag --" + text::escape(spelled) + " needs a value, e.g. --" + text::escape(spelled) +
             " " + flag->example);
        continue;
      }
      value = args[++i];
    }
    out.items.push_back({flag->name, *value, spelled, from_source});
  }
  if (spec.stop_at_word) out.rest.assign(args.begin() + static_cast<long>(i), args.end());
  if (!out.help && !problem.empty()) throw UsageError(problem);
  return out;
}

int64_t to_int64(const std::string& flag, const std::string& value, int64_t lo, int64_t hi) {
  char* end = nullptr;
  long long x = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || x < lo || x > hi)
    LOOM_USAGE("--", flag, " must be an integer in [", lo, ", ", hi, "], got ", text::quote(value));
  return x;
}

int to_int(const std::string& flag, const std::string& value, int lo, int hi) {
  return static_cast<int>(to_int64(flag, value, lo, hi));
}

std::vector<std::string> split_list(const std::string& value) {
  std::vector<std::string> out;
  std::stringstream in(value);
  std::string item;
  bool empty_item = false;
  while (std::getline(in, item, ',')) {
    empty_item = empty_item || item.empty();
    if (!item.empty()) out.push_back(item);
  }
  // Nothing but commas names nothing (the caller says so, naming its flag); a value left out
  // between others is a typo.
  if (empty_item && !out.empty())
    LOOM_USAGE("the list '", value, "' has an empty item; separate its values by single commas");
  return out;
}

}  // namespace loom::flags

#pragma once
// Tiny flag reader for subcommands: "--name value" and "--name=value".
#include <map>
#include <string>
#include <vector>

namespace loom::cli {

struct Args {
  std::map<std::string, std::string> flags;
  std::vector<std::string> rest;  // unconsumed, in order
};

// Extracts the flags in `known` (without the leading --) from args; everything else goes to
// rest. Flags listed in `switches` take no value. Throws UsageError on a known flag without value.
Args take_flags(const std::vector<std::string>& args, const std::vector<std::string>& known,
                const std::vector<std::string>& switches = {});

int to_int(const std::string& flag, const std::string& v, int lo, int hi);

}  // namespace loom::cli

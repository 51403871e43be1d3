#pragma once
// The one flag parser of the loom tool: every command (and the configuration fields) reads
// its flags here, so the rules are the same everywhere:
//  - `--name value` and `--name=value`; `-` and `_` are the same in a name (--seq-len, --seq_len);
//  - `-h` and `--help` ask for the command's help, wherever they appear among the flags;
//  - an unknown flag, a flag without its value, a value given to a switch and a stray word are
//    usage errors (loom::UsageError, one line) that name the fix;
//  - a value may start with "-" (--steps -1) but not with "--": that reads as a forgotten
//    value; `--name=--odd` passes one.
// No libtorch, no MPI: tested fast (tests/flags).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom::flags {

struct Flag {
  std::string name;     // without "--", words joined by '-': "seq-len"
  std::string example;  // a value for messages ("4"); empty: a switch, which takes no value
  bool hidden = false;  // internal: never suggested
  // true|false: alone (no value after it, or another flag) it means true, so --overwrite
  // reads as --overwrite true.
  bool boolean = false;
};

// Flags named by a table kept elsewhere (the configuration fields, config::flag_source()).
struct Source {
  // The flag `name` (as typed, without "--") names, or nullopt. May throw UsageError (an
  // ambiguous name).
  std::function<std::optional<Flag>(const std::string& name)> find;
  // What an unknown `name` may have meant, best first, without "--".
  std::function<std::vector<std::string>(const std::string& name)> suggest;
};

struct Spec {
  std::string command;  // "simulate": messages say "for loom simulate"; "" for none
  std::vector<Flag> flags;
  const Source* source = nullptr;  // looked up after `flags`
  // false: every argument must be a flag. true (loom launch): the flags end at "--" or at the
  // first word that is no flag's value; what follows is returned in `rest`.
  bool stop_at_word = false;
};

struct Parsed {
  struct Item {
    std::string name;          // the Flag's name
    std::string value;         // "" for a switch
    std::string spelled;       // as typed, without "--": for messages and to pass it on
    bool from_source = false;  // named by Spec::source, not by Spec::flags
  };
  std::vector<Item> items;        // in the order given
  std::vector<std::string> rest;  // stop_at_word: the words after the flags
  bool help = false;

  bool has(const std::string& name) const;
  // The last value given to `name`, or `fallback`.
  std::string get(const std::string& name, const std::string& fallback = "") const;
};

// Throws UsageError for bad input, unless help was asked for: then `help` is set and the rest
// of the input is not checked.
Parsed parse(const std::vector<std::string>& args, const Spec& spec);

// "--flag must be an integer in [lo, hi], got 'v'" otherwise.
int64_t to_int64(const std::string& flag, const std::string& value, int64_t lo, int64_t hi);
int to_int(const std::string& flag, const std::string& value, int lo, int hi);

// "a,b,c" -> {a, b, c}; "" and "," -> {}; UsageError for an empty item among values ("a,,c",
// ",a").
std::vector<std::string> split_list(const std::string& value);

}  // namespace loom::flags

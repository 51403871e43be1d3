#pragma once
// Small text helpers for error messages: one line, quoted, with a guess at what was meant.
#include <string>
#include <string_view>
#include <vector>

namespace loom::text {

// `s` with control characters escaped, so that an error message stays on one line (the CLI
// prints usage errors as a single line).
std::string escape(std::string_view s);

// escape(s) between `q` quotes for an error message.
std::string quote(std::string_view s, char q = '\'');

// `s` lower-cased (ASCII only; units and choices are ASCII).
std::string lower(std::string_view s);

// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions, so that
// "modle" is one edit away from "model".
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is close enough to be a useful guess.
// A candidate that contains `word` (e.g. "batch" in "global_batch") also counts as close.
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

// "'a' or 'b'", each with `prefix` ("--" for flags): the guesses of a "did you mean".
std::string alternatives(const std::vector<std::string>& guesses, const std::string& prefix = "");

}  // namespace loom::text

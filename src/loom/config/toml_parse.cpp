#include "loom/config/toml_parse.h"

#include <algorithm>

#include "loom/common/error.h"

namespace loom::config {

toml::table parse_toml(std::string_view text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    std::string what(e.description());
    std::replace(what.begin(), what.end(), '\n', ' ');
    std::replace(what.begin(), what.end(), '\r', ' ');
    LOOM_USAGE("cannot parse ", origin, " at line ", at.line, ", column ", at.column, ": ", what,
               "; fix the TOML syntax there");
  }
}

}  // namespace loom::config

#include "loom/config/toml_parse.h"

#include "loom/common/error.h"
#include "loom/common/text.h"

namespace loom::config {

toml::table parse_toml(std::string_view text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    LOOM_USAGE("cannot parse ", origin, " at line ", at.line, ", column ", at.column, ": ",
               text::escape(e.description()), "; fix the TOML syntax there");
  }
}

}  // namespace loom::config

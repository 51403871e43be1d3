#pragma once
// The TOML files loom reads (configurations, cluster files) parse through one function, so a
// syntax error reads the same wherever it is: one line naming the file, line and column.
#include <toml++/toml.h>

#include <string>
#include <string_view>

namespace loom::config {

// `text` parsed; a syntax error is a usage error naming `origin` (the file), line and column.
toml::table parse_toml(std::string_view text, const std::string& origin);

}  // namespace loom::config

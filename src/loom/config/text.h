#pragma once
// TOML text for the config sources (not part of the public contract); the message helpers
// (quote, closest, ...) are loom/common/text.h.
#include <string>
#include <string_view>

#include "loom/common/text.h"

namespace loom::config::detail {

// `s` as a TOML basic string, "..." with escapes.
std::string toml_string(std::string_view s);

}  // namespace loom::config::detail

#pragma once
// The configuration reference as Markdown, generated from the schema (config::fields()).
// `loom train --help-markdown` prints it; docs/guide/configuration.md is its output
// (`make docs` rewrites it, the test cli_config_reference checks it).
#include <ostream>

namespace loom::cli {

void print_config_markdown(std::ostream& out);

}  // namespace loom::cli

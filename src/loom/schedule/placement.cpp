#include "loom/schedule/schedule.h"

namespace loom::schedule {

std::string_view placement_name(Placement p) {
  return p == Placement::V ? "v" : "looping";
}

std::optional<Placement> parse_placement(std::string_view text) {
  if (text == "looping") return Placement::Looping;
  if (text == "v") return Placement::V;
  return std::nullopt;
}

}  // namespace loom::schedule

#include "loom/schedule/generate.h"

#include "loom/common/error.h"
#include "loom/schedule/deps.h"
#include "loom/schedule/generators.h"

namespace loom::schedule {
namespace detail {

void check_shape(const Shape& shape) {
  if (shape.pp < 1) LOOM_USAGE("pp must be >= 1 (got ", shape.pp, ")");
  if (shape.loops < 1) LOOM_USAGE("loops must be >= 1 (got ", shape.loops, ")");
  if (shape.microbatches < 1)
    LOOM_USAGE("microbatches must be >= 1 (got ", shape.microbatches, ")");
}

Schedule empty_schedule(const std::string& name, const Shape& shape) {
  Schedule s;
  s.name = name;
  s.shape = shape;
  s.ranks.resize(shape.pp);
  return s;
}

}  // namespace detail

namespace {

std::string known_names() {
  std::string out;
  for (const std::string& n : generator_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string shape_text(const Shape& shape) {
  return loom::detail::concat("pp=", shape.pp, " loops=", shape.loops,
                              " microbatches=", shape.microbatches);
}

}  // namespace

std::vector<std::string> generator_names() {
  return {"gpipe", "1f1b", "interleaved", "bfs", "zb-h1", "zbv", "dualpipev"};
}

Placement placement_of(const std::string& name) {
  return name == "zbv" || name == "dualpipev" ? Placement::V : Placement::Looping;
}

std::string unsupported_reason(const std::string& name, const Shape& shape) {
  bool known = false;
  for (const std::string& n : generator_names()) known = known || n == name;
  if (!known) return loom::detail::concat("unknown schedule '", name, "'; known: ", known_names());
  if (shape.pp < 1 || shape.loops < 1 || shape.microbatches < 1)
    return loom::detail::concat("pp, loops and microbatches must all be >= 1 (got ",
                                shape_text(shape), ")");
  if ((name == "1f1b" || name == "zb-h1") && shape.loops != 1)
    return loom::detail::concat(name, " needs loops=1 (got loops=", shape.loops,
                                "); use interleaved or bfs for several stages per rank");
  if ((name == "zbv" || name == "dualpipev") && shape.loops != 2)
    return loom::detail::concat(
        name, " holds two stages per rank in a V (needs loops=2, got loops=", shape.loops,
        "); set --loops 2, or use zb-h1 with loops=1");
  if (name == "dualpipev" && shape.microbatches < 2 * shape.pp)
    return loom::detail::concat("dualpipev needs microbatches >= 2 x pp (got ", shape_text(shape),
                                "); use microbatches=", 2 * shape.pp, " or the zbv schedule");
  if (name == "interleaved" && shape.loops > 1 && shape.microbatches % shape.pp != 0)
    return loom::detail::concat(
        "interleaved with loops>1 needs microbatches divisible by pp (got ", shape_text(shape),
        "); use microbatches=", (shape.microbatches / shape.pp + 1) * shape.pp,
        " or the bfs schedule, which takes any count");
  return "";
}

Schedule generate(const std::string& name, const Shape& requested) {
  std::string reason = unsupported_reason(name, requested);
  if (!reason.empty()) throw UsageError(reason);
  Shape shape = requested;
  shape.placement = placement_of(name);
  if (name == "gpipe") return detail::gen_gpipe(shape);
  if (name == "1f1b") return detail::gen_1f1b(shape);
  if (name == "interleaved") return detail::gen_interleaved(shape);
  if (name == "bfs") return detail::gen_bfs(shape);
  if (name == "zbv") return detail::gen_zbv(shape);
  if (name == "dualpipev") return detail::gen_dualpipev(shape);
  return detail::gen_zb_h1(shape);
}

}  // namespace loom::schedule

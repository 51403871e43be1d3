// loom schedule: generate (or load), validate, optionally lower, and print or draw a schedule.
#include <iostream>

#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/flags/flags.h"
#include "loom/plan/parallel.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/io.h"
#include "loom/schedule/lower.h"
#include "loom/schedule/timing.h"
#include "loom/schedule/validate.h"

namespace loom::cli {

int schedule_command(const std::vector<std::string>& args) {
  const flags::Parsed a = flags::parse(args, {"schedule",
                                              {{"schedule", "bfs"},
                                               {"pp", "4"},
                                               {"loops", "2"},
                                               {"microbatches", "8"},
                                               {"format", "ascii"},
                                               {"out", "schedule.svg"},
                                               {"file", "schedule.csv"},
                                               {"dp-mode", "zero3"},
                                               {"lower", ""}}});
  if (a.help) {
    std::cout
        << "usage: loom schedule [--schedule NAME | --file FILE.csv] [--pp P] [--loops V]\n"
           "                     [--microbatches M] [--format ascii|svg|trace|csv]\n"
           "                     [--lower [--dp-mode allreduce|zero3]] [--out FILE]\n\n"
           "Generates a pipeline schedule (gpipe, 1f1b, interleaved, bfs, zb-h1, zbv, dualpipev),\n"
           "validates it and prints it (zbv, dualpipev: V placement, loops 2 by default).\n"
           "--lower adds the sends, receives and data-parallel actions the runtime executes.\n"
           "--file loads a hand-written CSV schedule instead.\n";
    return 0;
  }
  schedule::Schedule s;
  if (a.has("file")) {
    s = schedule::load_csv(a.get("file"));
  } else {
    const std::string name = a.get("schedule", "1f1b");
    // The V schedules (zbv, dualpipev) have two stages per rank, always: their own default.
    const bool v = schedule::placement_of(name) == schedule::Placement::V;
    schedule::Shape shape{flags::to_int("pp", a.get("pp", "2"), 1, 1024),
                          flags::to_int("loops", a.get("loops", v ? "2" : "1"), 1, 64),
                          flags::to_int("microbatches", a.get("microbatches", "4"), 1, 4096)};
    s = schedule::generate(name, shape);
  }
  if (a.has("file")) {
    // A hand-written schedule: the problem, then the grid with the offending action marked.
    if (const schedule::ValidationResult v = schedule::check(s); !v.ok)
      throw UsageError(a.get("file") + ": " + v.message +
                       "; fix the file (the action is marked below)\n" + v.grid);
  }
  schedule::validate(s);
  if (a.has("lower")) {
    schedule::LowerOptions lo;
    // "none": one replica (no data-parallel actions); a mode: its actions on several.
    const std::string mode = a.get("dp-mode", "allreduce");
    lo.dp_mode =
        mode == "none" ? schedule::DpMode::None : plan::lowering_mode(plan::parse_dp_mode(mode), 2);
    s = schedule::lower(s, lo);
    schedule::validate(s);
  }
  std::string fmt = a.get("format", "ascii"), out;
  if (fmt == "ascii") {
    out = schedule::render_ascii(s);
    schedule::Timing t = schedule::time_schedule(s);
    out += "bubble fraction (F=1, B=2): " + std::to_string(t.bubble_fraction()) + "\n";
  } else if (fmt == "svg") {
    out = schedule::render_svg(s);
  } else if (fmt == "trace") {
    out = schedule::render_trace(s);
  } else if (fmt == "csv") {
    out = schedule::to_csv(s);
  } else {
    LOOM_USAGE("--format must be ascii, svg, trace or csv, got '", fmt, "'");
  }
  if (a.has("out")) {
    const std::string path = a.get("out");
    write_file_atomic(path, out, "pass a writable path to --out");
    std::cerr << "wrote " << path << "\n";
  } else {
    std::cout << out;
  }
  return 0;
}

}  // namespace loom::cli

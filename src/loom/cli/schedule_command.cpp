// loom schedule: generate (or load), validate, optionally lower, and print or draw a schedule.
#include <fstream>
#include <iostream>

#include "loom/cli/args.h"
#include "loom/cli/commands.h"
#include "loom/common/error.h"
#include "loom/schedule/generate.h"
#include "loom/schedule/io.h"
#include "loom/schedule/lower.h"
#include "loom/schedule/timing.h"
#include "loom/schedule/validate.h"

namespace loom::cli {

int schedule_command(const std::vector<std::string>& args) {
  Args a = take_flags(args,
                      {"schedule", "pp", "loops", "microbatches", "format", "out", "file",
                       "dp-mode"},
                      {"help", "lower"});
  if (a.flags.count("help")) {
    std::cout << "usage: loom schedule [--schedule NAME | --file FILE.csv] [--pp P] [--loops V]\n"
                 "                     [--microbatches M] [--format ascii|svg|trace|csv]\n"
                 "                     [--lower [--dp-mode allreduce|zero3]] [--out FILE]\n\n"
                 "Generates a pipeline schedule (gpipe, 1f1b, interleaved, bfs, zb-h1), validates\n"
                 "it and prints it. --lower adds the sends, receives and data-parallel actions the\n"
                 "runtime executes. --file loads a hand-written CSV schedule instead.\n";
    return 0;
  }
  if (!a.rest.empty())
    LOOM_USAGE("unknown argument '", a.rest[0], "' for loom schedule; see loom schedule --help");
  auto get = [&](const std::string& k, const std::string& d) {
    return a.flags.count(k) ? a.flags.at(k) : d;
  };
  schedule::Schedule s;
  if (a.flags.count("file")) {
    s = schedule::load_csv(a.flags.at("file"));
  } else {
    schedule::Shape shape{to_int("pp", get("pp", "2"), 1, 1024), to_int("loops", get("loops", "1"), 1, 64),
                          to_int("microbatches", get("microbatches", "4"), 1, 4096)};
    s = schedule::generate(get("schedule", "1f1b"), shape);
  }
  schedule::validate(s);
  if (a.flags.count("lower")) {
    schedule::LowerOptions lo;
    std::string mode = get("dp-mode", "allreduce");
    if (mode != "allreduce" && mode != "zero3" && mode != "none")
      LOOM_USAGE("--dp-mode for loom schedule must be none, allreduce or zero3, got '", mode, "'");
    lo.dp_mode = mode == "zero3"  ? schedule::DpMode::ZeroParams
                 : mode == "none" ? schedule::DpMode::None
                                  : schedule::DpMode::Reduce;
    s = schedule::lower(s, lo);
    schedule::validate(s);
  }
  std::string fmt = get("format", "ascii"), out;
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
  if (a.flags.count("out")) {
    std::string path = a.flags.at("out");
    std::string tmp = path + ".tmp";
    std::ofstream f(tmp);
    if (!f || !(f << out) || !f.flush()) {
      std::remove(tmp.c_str());
      LOOM_USAGE("cannot write '", path, "'; pass a writable path to --out");
    }
    f.close();
    std::rename(tmp.c_str(), path.c_str());
    std::cerr << "wrote " << path << "\n";
  } else {
    std::cout << out;
  }
  return 0;
}

}  // namespace loom::cli

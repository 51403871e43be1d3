#include "loom/launch/mpirun_stderr.h"

#include <regex>

namespace loom::launch {
namespace {

bool is_frame(const std::string& l) {
  return l.size() >= 20 && l.find_first_not_of('-') == std::string::npos;
}

}  // namespace

void MpirunStderr::feed(std::string_view bytes) {
  partial_.append(bytes);
  size_t start = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
    line(partial_.substr(start, nl - start));
    start = nl + 1;
  }
  partial_.erase(0, start);
}

void MpirunStderr::finish() {
  if (!partial_.empty()) line(partial_);
  partial_.clear();
  if (in_banner_) {  // never closed: not one of the banners loom knows
    out_(banner_);
    banner_.clear();
    in_banner_ = false;
  }
}

void MpirunStderr::line(const std::string& l) {
  // "[host:pid] [[job,0],0] ORTE_ERROR_LOG: Data unpack would read past end of buffer in file
  // ...": Open MPI 4 tripping over its own help-message aggregation when a job ends.
  static const std::regex orte_log(
      R"(^\[[^\]]*\] (\[\[[0-9]+,[0-9]+\],[0-9]+\] )?ORTE_ERROR_LOG: .*)");
  if (is_frame(l)) {
    if (in_banner_) {
      banner_ += l + "\n";
      end_banner();
    } else {
      in_banner_ = true;
      banner_ = l + "\n";
    }
    return;
  }
  if (in_banner_) {
    banner_ += l + "\n";
    return;
  }
  // "[host:pid] 2 more processes have sent help message help-mpi-api.txt / mpi-abort" and its
  // "Set MCA parameter "orte_base_help_aggregate" to 0 ...": the banners loom left out, counted.
  static const std::regex aggregated(
      R"(^\[[^\]]*\] ([0-9]+ more process(es)? ha(s|ve) sent help message .*|)"
      R"(Set MCA parameter "orte_base_help_aggregate" to 0 .*))");
  if (std::regex_match(l, orte_log) || std::regex_match(l, aggregated)) return;
  out_(l + "\n");
}

void MpirunStderr::end_banner() {
  static const std::regex killed(
      R"(mpirun noticed that process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+))");
  static const std::regex known(
      R"(MPI_ABORT was invoked on rank|Primary job +terminated normally|)"
      R"(mpirun noticed that process rank|mpirun detected that one or more processes exited)");
  std::smatch m;
  if (std::regex_search(banner_, m, killed) && killed_rank_ < 0) {
    killed_rank_ = std::stoi(m[1].str());
    killed_signal_ = std::stoi(m[2].str());
  }
  if (!std::regex_search(banner_, known)) out_(banner_);
  banner_.clear();
  in_banner_ = false;
}

}  // namespace loom::launch

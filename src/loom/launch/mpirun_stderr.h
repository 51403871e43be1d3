#pragma once
// What mpirun writes to stderr, as loom passes it on: the ranks' own lines unchanged, Open MPI's
// framed banners about the job's end left out (a failing rank says why in one line itself),
// what the banner of a rank killed by a signal says kept as the rank and the signal, and
// Open MPI's stray internal error-log lines dropped. A banner loom does not know (mpirun
// cannot start the program, say) is passed on whole.
#include <functional>
#include <string>
#include <string_view>

namespace loom::launch {

class MpirunStderr {
 public:
  explicit MpirunStderr(std::function<void(std::string_view)> out) : out_(std::move(out)) {}
  void feed(std::string_view bytes);  // any split: lines are handled once complete
  void finish();                      // a last line without its newline, an open banner
  int killed_rank() const { return killed_rank_; }  // -1 when no banner named one
  int killed_signal() const { return killed_signal_; }

 private:
  void line(const std::string& l);
  void end_banner();

  std::function<void(std::string_view)> out_;
  std::string partial_, banner_;
  bool in_banner_ = false;
  int killed_rank_ = -1, killed_signal_ = 0;
};

}  // namespace loom::launch

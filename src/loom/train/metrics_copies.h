#pragma once
// Hosts without a shared run folder: the run's metrics.jsonl, which rank 0 writes, kept in
// every host's run folder too (by the host's lowest rank), so that a host's lost disk loses
// none of the run's history and a resume on a new disk goes on with it. The lines travel after
// each save and when the run ends; a resume first makes every host's copy the longest history up to
// its step.
#include <cstdint>
#include <string>

#include "loom/comm/backend.h"

namespace loom::train {

class MetricsCopies {
 public:
  // path: <output.dir>/metrics.jsonl; writer: this rank writes its host's folder (rank 0 is).
  MetricsCopies(comm::Backend& world, std::string path, bool writer);

  // At a resume from `step` (collective): every writer's metrics.jsonl becomes the lines up to
  // `step` of the writer that holds the most of them.
  void align(int64_t step);
  // After a save and at the run's end (collective): the lines rank 0 wrote since the last call
  // reach the other writers (the first call of a new run replaces what their folders held).
  void copy_new_lines();

 private:
  comm::Backend& world_;
  std::string path_;
  bool writer_;
  uint64_t sent_ = 0;     // rank 0: bytes of its metrics.jsonl the writers have
  bool started_ = false;  // the writers' copy belongs to this run (later lines are appended)
};

}  // namespace loom::train

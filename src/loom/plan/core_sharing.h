#pragma once
// Processor sharing of one machine's cores among the ranks that compute at the same moment.
// On this machine (2 cores) a rank of a 2-stage pipeline computes alone while its peer waits
// in a bubble, and up to ~1.8x slower while both compute; 4 ranks on 2 cores time-share them.
// The rate of one computing rank, in seconds of alone-compute per second, with n world ranks
// computing on C cores and S the action's slowdown with every core busy (measured by
// `loom profile`):
//   n <= C:  1 / (1 + (S - 1) (n - 1) / (C - 1))   (cores share memory bandwidth and caches)
//   n >  C:  (C / n) / S                            (every core busy and time-shared)
// When the world's ranks outnumber the cores, every compute is also `oversubscribed` times
// slower than that share (measured, cluster.h: the ranks that wait poll for their messages,
// the scheduler switches between ranks and they evict each other's caches), whether or not
// the other ranks compute at that moment.
// One job per simulated rank at a time; each stands for `replicas` identical world ranks
// (data- and tensor-parallel copies run the same lists in lock-step in the simulator).
// Jobs are submitted with their start time; resolve() advances the clock to the next
// completion. A job must not start before the clock: the simulator submits a job as soon as
// its inputs are known, and an input that is not known waits on a job that has not finished.
#include <vector>

namespace loom::plan {

class CoreSharing {
 public:
  // jobs x replicas = the world's ranks.
  CoreSharing(int cores, int replicas, int jobs, double oversubscribed = 1);

  // Rate of one of `computing` world ranks on `cores` cores (formula above).
  static double rate(int computing, int cores, double slowdown);

  void submit(int job, double start, double work_s, double slowdown);
  bool submitted(int job) const { return jobs_[job].state != State::Idle; }
  // True once the job has finished: sets *end and frees the slot for the next job.
  bool take_finished(int job, double* end);
  bool any_running() const;
  // Advances the clock until at least one submitted job finishes; false if none is submitted.
  bool resolve();

 private:
  enum class State { Idle, Running, Finished };
  struct Job {
    State state = State::Idle;
    double start = 0, left = 0, slowdown = 1, end = 0;
  };
  int cores_, replicas_;
  double oversub_ = 1;  // applies when jobs x replicas > cores
  double clock_ = 0;
  std::vector<Job> jobs_;
};

}  // namespace loom::plan

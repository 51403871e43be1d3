#pragma once
// The gradient buckets of one stage, for every mode that reduces gradients in buckets while
// the backward runs (allreduce, zero1). Parameters go in reverse order, because the backward
// produces the last parameters' gradients first; a new bucket starts whenever the next
// parameter would push a non-empty bucket past the cap, so a parameter larger than the cap
// gets a bucket of its own. Consecutive parameters are adjacent in a flat buffer, so a bucket
// is one range of it.
//
// During the stage's last backward of the step (armed), each parameter whose gradient is
// final is reported with ready(); the bucket whose parameters are all ready is returned once,
// to be started at that moment, overlapped with the rest of the backward.
#include <cstdint>
#include <vector>

namespace loom::parallel {

class GradBuckets {
 public:
  struct Bucket {
    std::vector<int> params;  // parameter indices, descending
    int64_t numel = 0;
  };

  GradBuckets() = default;
  // numels[i]: elements of parameter i; cap: elements per bucket (at least 1).
  GradBuckets(const std::vector<int64_t>& numels, int64_t cap);
  // parallel.bucket_mib in elements of `element_bytes` (at least 1).
  static int64_t cap_elements(double cap_mib, int64_t element_bytes);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  int size() const { return static_cast<int>(buckets_.size()); }
  int bucket_of(int param) const { return bucket_of_.at(param); }

  // The stage's last backward of the step begins: no parameter is ready yet.
  void arm();
  // REDUCE_GRAD: later ready() calls start nothing.
  void disarm() { armed_ = false; }
  bool armed() const { return armed_; }
  // Parameter `param`'s gradient is final. Returns the bucket that just became complete while
  // armed, or -1.
  int ready(int param);

 private:
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_;
  std::vector<int> ready_;  // per bucket, parameters ready in this backward
  bool armed_ = false;
};

}  // namespace loom::parallel

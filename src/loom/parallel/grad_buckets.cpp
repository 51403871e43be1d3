#include "loom/parallel/grad_buckets.h"

#include <algorithm>

#include "loom/common/error.h"

namespace loom::parallel {

GradBuckets::GradBuckets(const std::vector<int64_t>& numels, int64_t cap) {
  LOOM_CHECK_GE(cap, 1, "a gradient bucket holds at least one element");
  bucket_of_.assign(numels.size(), -1);
  for (int i = static_cast<int>(numels.size()) - 1; i >= 0; --i) {
    if (buckets_.empty() || buckets_.back().numel + numels[i] > cap) buckets_.emplace_back();
    buckets_.back().params.push_back(i);
    buckets_.back().numel += numels[i];
    bucket_of_[i] = size() - 1;
  }
  ready_.assign(buckets_.size(), 0);
}

int64_t GradBuckets::cap_elements(double cap_mib, int64_t element_bytes) {
  return std::max<int64_t>(1, int64_t(cap_mib * (1 << 20)) / element_bytes);
}

void GradBuckets::arm() {
  armed_ = true;
  std::fill(ready_.begin(), ready_.end(), 0);
}

int GradBuckets::ready(int param) {
  if (!armed_) return -1;
  const int b = bucket_of_.at(param);
  return ++ready_[b] == static_cast<int>(buckets_[b].params.size()) ? b : -1;
}

}  // namespace loom::parallel

#include "loom/parallel/memory_tracker.h"

#include <ATen/DeviceAccelerator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "loom/parallel/memory_report.h"

namespace loom::parallel {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};
std::atomic<int> g_device{-1};  // >= 0: the accelerator whose allocator counts

int64_t device_stat(bool peak) {
  const auto index = static_cast<c10::DeviceIndex>(g_device.load());
  const auto stats = at::accelerator::getDeviceStats(index);
  const auto& bytes =
      stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
  return peak ? bytes.peak : bytes.current;
}

// libtorch's raw_allocate path requires context == data, so sizes live in a side table.
std::mutex g_mu;
std::unordered_map<void*, int64_t> g_sizes;
c10::DeleterFnPtr g_inner_free = nullptr;

void tracked_free(void* p) {
  if (!p) return;
  int64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_sizes.find(p);
    if (it != g_sizes.end()) {
      bytes = it->second;
      g_sizes.erase(it);
    }
  }
  g_live.fetch_sub(bytes, std::memory_order_relaxed);
  if (MemoryReport::on_cpu()) MemoryReport::freed(reinterpret_cast<uintptr_t>(p));
  g_inner_free(p);
}

class TrackingAllocator : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr p = inner_->allocate(n);
    void* data = p.get();
    c10::Device dev = p.device();
    if (!data) return p;
    p.release_context();  // ownership moves to tracked_free
    int64_t bytes = static_cast<int64_t>(n);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_sizes[data] = bytes;
    }
    int64_t now = g_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    if (MemoryReport::on_cpu()) MemoryReport::allocated(reinterpret_cast<uintptr_t>(data), bytes);
    return {data, data, &tracked_free, dev};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &tracked_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void MemoryTracker::install() {
  bool expected = false;
  if (!g_installed.compare_exchange_strong(expected, true)) return;
  c10::Allocator* inner = c10::GetDefaultCPUAllocator();
  g_inner_free = inner->raw_deleter();
  if (!g_inner_free) {  // cannot wrap an allocator without a plain deleter: stay off
    g_installed = false;
    return;
  }
  static TrackingAllocator tracker(inner);
  c10::SetCPUAllocator(&tracker, /*priority=*/100);
}

bool MemoryTracker::installed() {
  return g_installed.load() || g_device.load() >= 0;
}
void MemoryTracker::track_device(int index) {
  g_device = index;
}
int64_t MemoryTracker::live_bytes() {
  if (g_device.load() >= 0) return device_stat(false);
  return g_live.load(std::memory_order_relaxed);
}
int64_t MemoryTracker::peak_bytes() {
  if (g_device.load() >= 0) return device_stat(true);
  return g_peak.load(std::memory_order_relaxed);
}
void MemoryTracker::reset_peak() {
  if (g_device.load() >= 0) return at::accelerator::resetPeakStats(g_device.load());
  g_peak.store(g_live.load());
}

}  // namespace loom::parallel

#pragma once
// What holds a rank's memory at its peak (`--output.memory_report`). While it is on, every
// allocation is tagged with the operators it was made under (libtorch's RecordFunction: the
// executor's action, the autograd node, the aten operator), and at each new peak of live bytes
// the live set is copied; write() prints that copy grouped by tag and size. CPU allocations
// come through MemoryTracker's allocator, a GPU's through its caching allocator's trace.
#include <cstdint>
#include <string>

namespace loom::parallel {

class MemoryReport {
 public:
  // From now on, on this process: device < 0 the CPU (MemoryTracker installed first), else
  // that GPU. What was allocated before is not seen, as MemoryTracker does not see it.
  static void start(int device);
  static bool on();
  static bool on_cpu();  // on, for the CPU's allocations (MemoryTracker's allocator calls in)
  // The peak is that of the live bytes inside steps: between step_begin() and step_end().
  static void step_begin();
  static void step_end();
  static void allocated(uintptr_t address, int64_t bytes);
  static void freed(uintptr_t address);
  // The live set at the peak, largest groups first; a header line names `title`.
  static void write(const std::string& path, const std::string& title);
};

}  // namespace loom::parallel

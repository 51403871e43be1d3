#include "loom/parallel/memory_report.h"

#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "loom/common/error.h"

namespace loom::parallel {
namespace {

struct Live {
  int64_t bytes;
  int tag;
};

std::atomic<bool> g_on{false}, g_cpu{false};
std::mutex g_mu;
std::unordered_map<uintptr_t, Live> g_live;
std::vector<std::string> g_tags;       // interned
std::map<std::string, int> g_tag_ids;  // tag -> index into g_tags
std::vector<Live> g_at_peak;           // the live set at the peak
int64_t g_live_bytes = 0, g_peak = 0;
bool g_in_step = false;

// Under g_mu.
void snapshot_if_peak() {
  if (!g_in_step || g_live_bytes <= g_peak) return;
  g_peak = g_live_bytes;
  g_at_peak.clear();
  for (const auto& [p, l] : g_live) g_at_peak.push_back(l);
}

// The operators this thread is inside, outermost first.
thread_local std::vector<std::string> t_scopes;

bool noise(const std::string& op) {  // allocation helpers that name nothing
  return op.rfind("aten::empty", 0) == 0 || op == "aten::_to_copy" || op == "aten::empty_like";
}

// The outermost two scopes and the innermost two that are not allocation helpers.
std::string current_tag() {
  std::vector<const std::string*> kept;
  for (const std::string& s : t_scopes)
    if (!noise(s)) kept.push_back(&s);
  if (kept.empty()) return t_scopes.empty() ? "(no operator)" : t_scopes.back();
  std::string tag;
  for (size_t i = 0; i < kept.size(); ++i) {
    if (kept.size() > 4 && i == 2) {
      tag += " > ...";
      i = kept.size() - 2;
    }
    tag += (tag.empty() ? "" : " > ") + kept[i]->substr(0, 80);
  }
  return tag;
}

int intern(const std::string& tag) {
  auto [it, fresh] = g_tag_ids.try_emplace(tag, int(g_tags.size()));
  if (fresh) g_tags.push_back(tag);
  return it->second;
}

void install_scopes() {
  at::addGlobalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        t_scopes.emplace_back(fn.name());
        return nullptr;
      },
      [](const at::RecordFunction&, at::ObserverContext*) {
        if (!t_scopes.empty()) t_scopes.pop_back();
      }));
}

}  // namespace

void MemoryReport::start(int device) {
  if (g_on.exchange(true)) return;
  install_scopes();
  g_cpu = device < 0;
  if (device >= 0) {
    c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
        [device](const c10::CachingDeviceAllocator::TraceEntry& e) {
          using Action = c10::CachingDeviceAllocator::TraceEntry::Action;
          if (e.device_ != device) return;
          if (e.action_ == Action::ALLOC) allocated(e.addr_, int64_t(e.size_));
          if (e.action_ == Action::FREE_COMPLETED) freed(e.addr_);
        });
  }
}

bool MemoryReport::on() {
  return g_on.load(std::memory_order_relaxed);
}

bool MemoryReport::on_cpu() {
  return g_cpu.load(std::memory_order_relaxed);
}

void MemoryReport::step_begin() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_in_step = true;
  snapshot_if_peak();
}

void MemoryReport::step_end() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_in_step = false;
}

void MemoryReport::allocated(uintptr_t address, int64_t bytes) {
  const std::string tag = current_tag();
  std::lock_guard<std::mutex> lock(g_mu);
  g_live[address] = {bytes, intern(tag)};
  g_live_bytes += bytes;
  snapshot_if_peak();
}

void MemoryReport::freed(uintptr_t address) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_live.find(address);
  if (it == g_live.end()) return;  // allocated before start()
  g_live_bytes -= it->second.bytes;
  g_live.erase(it);
}

void MemoryReport::write(const std::string& path, const std::string& title) {
  std::lock_guard<std::mutex> lock(g_mu);
  struct Group {
    int64_t bytes = 0, count = 0;
  };
  std::map<std::pair<int, int64_t>, Group> groups;  // (tag, size of one)
  for (const Live& l : g_at_peak) {
    Group& g = groups[{l.tag, l.bytes}];
    g.bytes += l.bytes;
    ++g.count;
  }
  std::vector<std::pair<std::pair<int, int64_t>, Group>> rows(groups.begin(), groups.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
  std::ofstream out(path);
  out << "# " << title << ": " << g_peak << " bytes live at the peak in " << g_at_peak.size()
      << " allocations\n# bytes, allocations x bytes each, the operators they were made under "
         "(outermost first; 1F3: stage 1's forward of micro-batch 3, as schedules write "
         "actions)\n";
  for (const auto& [key, g] : rows)
    out << g.bytes << "\t" << g.count << " x " << key.second << "\t" << g_tags[key.first] << "\n";
  if (!out) throw Error(detail::concat("cannot write the memory report '", path, "'"));
}

}  // namespace loom::parallel

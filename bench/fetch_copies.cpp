// What a rank that sends checkpoint files to another host at a resume holds in memory, and how
// long the copies take (train/host_copies.h): each file read whole into memory before it is sent
// ("whole", as fetches were made before), or read as it is sent, two chunks of each file at a
// time ("streamed", from_file). Two ranks (mpiexec -n 2), each with a folder of its own; rank 0
// sends F files of S MB to rank 1, which writes them durably. The two ways alternate A B B A
// round by round (this VM's speed drifts). Prints, for each way, the median seconds and the
// peak resident memory of rank 0 (the sender) above what it held before the copies (VmHWM, reset
// each round through /proc/self/clear_refs). With --both, rank 1 sends rank 0 as many files at the
// same time (copies both ways between one pair of ranks). Over MPI; with LOOM_COMM=gloo over Gloo
// (mpiexec only starts the ranks). usage: mpiexec -n 2 fetch_copies [--mb S (256)] [--files F
// (2)] [--rounds R (2)] [--both]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "loom/comm/world.h"
#include "loom/common/files.h"
#include "loom/train/host_copies.h"

namespace {

namespace fs = std::filesystem;
using loom::train::FileCopy;
using loom::train::Manifest;

// A line of /proc/self/status ("VmHWM", "VmRSS"), in MB.
double status_mb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::atof(line.c_str() + key.size() + 1) / 1024.0;
  return 0;
}

void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  loom::comm::init(loom::comm::launch_backend(), &argc, &argv);
  int mb = 256, nfiles = 2, rounds = 2;
  bool both = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--both") both = true;
    if (i + 1 == argc) break;
    if (a == "--mb") mb = std::atoi(argv[i + 1]);
    if (a == "--files") nfiles = std::atoi(argv[i + 1]);
    if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
  }
  loom::comm::Backend& world = loom::comm::world();
  if (world.size() != 2) {
    std::fprintf(stderr, "fetch_copies: run it on 2 ranks (mpiexec -n 2)\n");
    loom::comm::abort_all(2);
  }
  const int me = world.rank();
  std::string root;
  if (me == 0) root = (fs::temp_directory_path() / ("loom-fetch-" + std::to_string(getpid())));
  loom::train::broadcast_text(world, root, 0);
  const std::string folder = (fs::path(root) / ("h" + std::to_string(me))).string();
  fs::create_directories(folder);

  // Rank 0's files (and with --both as many of rank 1's), of bytes that do not compress; their
  // sizes and CRC-32s to both ranks.
  const int senders = both ? 2 : 1;
  std::vector<Manifest::File> files(static_cast<size_t>(nfiles * senders));
  std::vector<int64_t> crcs(files.size());
  const size_t bytes = static_cast<size_t>(mb) << 20;
  for (size_t i = 0; i < files.size(); ++i) {
    const int owner = static_cast<int>(i) / nfiles;
    files[i].name = "rank-" + std::to_string(i) + ".pt";
    files[i].bytes = static_cast<int64_t>(bytes);
    if (me != owner) continue;
    std::string b(bytes, '\0');
    std::mt19937_64 rng(i + 1);
    for (size_t k = 0; k + 8 <= b.size(); k += 8) {
      const uint64_t x = rng();
      std::memcpy(&b[k], &x, 8);
    }
    crcs[i] = loom::train::crc32_of(b);
    loom::write_file_atomic((fs::path(folder) / files[i].name).string(), b);
  }
  world.all_reduce(crcs.data(), crcs.size(), loom::comm::DType::Int64)->wait();
  std::vector<FileCopy> copies;
  for (size_t i = 0; i < files.size(); ++i) {
    const int owner = static_cast<int>(i) / nfiles;
    files[i].crc32 = static_cast<uint32_t>(crcs[i]);
    copies.push_back({static_cast<int>(i), owner, 1 - owner});
  }

  std::map<std::string, std::vector<double>> seconds, peak_mb;
  for (int r = 0; r < rounds; ++r) {
    const std::vector<std::string> ways =
        r % 2 ? std::vector<std::string>{"streamed", "whole", "whole", "streamed"}
              : std::vector<std::string>{"whole", "streamed", "streamed", "whole"};
    for (const std::string& way : ways) {
      for (const FileCopy& c : copies)  // what the last round copied here
        if (c.to == me) fs::remove(fs::path(folder) / files[c.file].name);
      std::map<int, std::string> held;  // "whole": what rank 0 sends, read first
      world.barrier()->wait();
      reset_peak();
      const double before = status_mb("VmRSS");
      const auto t0 = std::chrono::steady_clock::now();
      const std::string failure = loom::train::run_copies(world, copies, files, folder, [&](int i) {
        const std::string path = (fs::path(folder) / files[i].name).string();
        if (way == "streamed") return loom::train::from_file(path);
        return loom::train::in_memory(held[i] = loom::read_file(path));
      });
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double peak = status_mb("VmHWM") - before;
      held.clear();
      if (!failure.empty()) {
        std::fprintf(stderr, "fetch_copies: rank %d: %s\n", me, failure.c_str());
        loom::comm::abort_all(1);
      }
      world.barrier()->wait();
      if (me == 0) {
        seconds[way].push_back(s);
        peak_mb[way].push_back(peak);
        std::printf("round %d %s: %.2f s, rank 0's peak +%.0f MB\n", r, way.c_str(), s, peak);
      }
    }
  }
  if (me == 0) {
    std::printf("| way | files | file | copies (median) | rank 0's peak above before (median) |\n");
    std::printf("|---|---|---|---|---|\n");
    for (const char* way : {"whole", "streamed"})
      std::printf("| %s | %d%s | %d MB | %.2f s | %.0f MB |\n", way, nfiles,
                  both ? " each way" : "", mb, median(seconds[way]), median(peak_mb[way]));
  }
  world.barrier()->wait();
  fs::remove_all(folder);
  world.barrier()->wait();
  if (me == 0) fs::remove_all(root);
  loom::comm::finalize();
  return 0;
}

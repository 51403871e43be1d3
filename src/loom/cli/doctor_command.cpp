// loom doctor: what this machine gives a loom run (MPI, BLAS, threads, cores), measured.
#include <mpi.h>
#include <torch/torch.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "loom/cli/commands.h"
#include "loom/common/blas_core.h"

namespace loom::cli {
namespace {

// The BLAS library actually mapped into this process.
std::string loaded_blas() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    auto p = line.find('/');
    if (p == std::string::npos) continue;
    std::string path = line.substr(p);
    if (path.find("libblas") != std::string::npos || path.find("openblas") != std::string::npos ||
        path.find("libmkl") != std::string::npos || path.find("blis") != std::string::npos) {
      std::error_code ec;
      auto real = std::filesystem::canonical(path, ec);
      return ec ? path : real.string();
    }
  }
  return "none found";
}

double matmul_gflops(int n) {
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  torch::mm(a, b);
  int reps = 0;
  auto t0 = std::chrono::steady_clock::now();
  double el = 0;
  while (el < 0.5) {
    auto c = torch::mm(a, b);
    ++reps;
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return 2.0 * n * n * n * reps / el / 1e9;
}

}  // namespace

int doctor_command(const std::vector<std::string>& args) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string mpi(version, len);
  if (auto nl = mpi.find('\n'); nl != std::string::npos) mpi.resize(nl);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const char* ob = std::getenv("OPENBLAS_NUM_THREADS");
  if (!omp) setenv("OMP_NUM_THREADS", "1", 0);
  torch::set_num_threads(1);
  set_openblas_threads(1);
  double gf = matmul_gflops(512);
  std::string blas = loaded_blas();
  const std::string core = openblas_core();
  const bool fix = std::getenv("LOOM_BLAS_REEXEC") != nullptr;
  unsigned cores = std::thread::hardware_concurrency();
  std::cout << "loom doctor\n"
            << "  MPI                 " << mpi << "\n"
            << "  BLAS in use         " << blas << "\n"
            << "  OpenBLAS kernels    " << (core.empty() ? "n/a" : core)
            << (fix ? " (OPENBLAS_CORETYPE set by loom: OpenBLAS did not recognise this CPU)" : "")
            << "\n"
            << "  libtorch            " << TORCH_VERSION << "\n"
            << "  cores               " << cores << "\n"
            << "  threads per rank    " << torch::get_num_threads() << " (OMP_NUM_THREADS="
            << (omp ? omp : "unset") << ", OPENBLAS_NUM_THREADS=" << (ob ? ob : "unset") << ")\n"
            << "  matmul 512x512      " << gf << " GFLOP/s on one thread\n";
  int warnings = 0;
  if (blas.find("openblas") == std::string::npos && blas.find("mkl") == std::string::npos) {
    std::cout << "warning: the reference BLAS (" << blas
              << ") makes libtorch ~30x slower; run scripts/install-deps.sh (libopenblas0-pthread)\n";
    ++warnings;
  }
  if (openblas_core_is_fallback()) {
    std::cout << "warning: OpenBLAS uses its generic " << core << " kernels on this CPU, which "
              << "supports " << best_openblas_core_for_cpu() << "; set OPENBLAS_CORETYPE="
              << best_openblas_core_for_cpu() << " (loom does so itself unless LOOM_BLAS_FIX=0)\n";
    ++warnings;
  }
  if (!ob)
    std::cout << "note: OPENBLAS_NUM_THREADS is unset; `loom train --nproc` sets it to 1 per rank\n";
  std::cout << (warnings ? "doctor found problems\n" : "ok\n");
  return 0;
}

}  // namespace loom::cli

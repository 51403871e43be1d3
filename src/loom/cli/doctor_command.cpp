// loom doctor: what this machine gives a loom run (torch, CUDA and GPUs, communication
// backends, BLAS, threads, cores), measured.
#include <torch/torch.h>
#if LOOM_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "loom/cli/commands.h"
#include "loom/comm/c10d_backend.h"
#include "loom/comm/node_store.h"
#include "loom/comm/single_copy.h"
#include "loom/comm/world.h"
#include "loom/flags/flags.h"
#include "loom/model/cpu_gemm.h"

namespace loom::cli {
namespace {

// The BLAS in use: a BLAS library mapped into this process, else the one linked into libtorch
// (the torch wheel links MKL statically: BLAS_INFO in its build configuration).
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
  const std::string conf = at::show_config();
  const auto p = conf.find("BLAS_INFO=");
  if (p == std::string::npos) return "none found";
  const auto e = conf.find_first_of(", \n", p);
  return conf.substr(p + 10, e == std::string::npos ? std::string::npos : e - p - 10) +
         " (linked into libtorch)";
}

// Through the library training's products take (model/cpu_gemm.h, train.cpu_gemm = auto).
double matmul_gflops(int n) {
  auto a = torch::randn({n, n}), b = torch::randn({n, n}), c = torch::empty({n, n});
  model::gemm_into(a, b, c, 0.f);
  int reps = 0;
  auto t0 = std::chrono::steady_clock::now();
  double el = 0;
  while (el < 0.5) {
    model::gemm_into(a, b, c, 0.f);
    ++reps;
    el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return 2.0 * n * n * n * reps / el / 1e9;
}

// "loom-h0 (10.77.0.10 on eth0)": the name a rank reports for placement (LOOM_HOST or the
// hostname) and the IPv4 addresses other hosts may reach it at.
std::string host() {
  std::string out = comm::host_name(), addrs;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (ifaddrs* i = list; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      char buf[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
      if (std::string(buf).rfind("127.", 0) == 0) continue;
      addrs += (addrs.empty() ? "" : ", ") + std::string(buf) + " on " + i->ifa_name;
    }
    ::freeifaddrs(list);
  }
  return out + " (" + (addrs.empty() ? "loopback only" : addrs) + ")";
}

// "2 GPUs: NVIDIA H200 (139 GiB), ..." or why there are none.
std::string gpus() {
  if (!LOOM_HAVE_CUDA) return "none (CPU-only build)";
  const auto n = torch::cuda::device_count();
  if (n == 0) return "none visible (no GPU or no driver on this machine)";
  std::ostringstream os;
  os << n << (n == 1 ? " GPU: " : " GPUs: ");
#if LOOM_HAVE_CUDA
  for (int i = 0; i < static_cast<int>(n); ++i) {
    const auto* p = at::cuda::getDeviceProperties(i);
    os << (i ? ", " : "") << p->name << " (" << (p->totalGlobalMem >> 30) << " GiB)";
  }
#endif
  return os.str();
}

const char* kDoctorHelp = R"(usage: loom doctor

Reports what this machine gives a loom run: the libtorch version and whether CUDA is compiled
in, the GPUs, the communication backends, MPI, the BLAS in use, cores, threads per rank and
a one-thread matrix-product speed, and whether Open MPI can copy a message between two ranks
of this machine in one step (CMA). Says what to fix when something would slow a run down.
)";

std::string backends() {
  std::string why;
  std::string nccl = comm::c10d_available(comm::BackendKind::Nccl, &why) ? "nccl" : "";
  return "mpi, gloo" + (nccl.empty() ? " (nccl: " + why + ")" : ", " + nccl);
}

}  // namespace

int doctor_command(const std::vector<std::string>& args) {
  if (flags::parse(args, {"doctor", {}}).help) {
    std::cout << kDoctorHelp;
    return 0;
  }
  const std::string mpi = comm::mpi_library_version();
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const char* mkl = std::getenv("MKL_NUM_THREADS");
  if (!omp) setenv("OMP_NUM_THREADS", "1", 0);
  torch::set_num_threads(1);
  double gf = matmul_gflops(512);
  std::string blas = loaded_blas();
  unsigned cores = std::thread::hardware_concurrency();
  const std::string cma = comm::single_copy_problem();
  std::cout << "loom doctor\n"
            << "  libtorch            " << TORCH_VERSION
            << (LOOM_HAVE_CUDA ? " (CUDA compiled in)" : " (CPU-only build)") << "\n"
            << "  host                " << host() << "\n"
            << "  GPUs                " << gpus() << "\n"
            << "  backends            " << backends() << "\n"
            << "  MPI                 " << mpi << "\n"
            << "  MPI shared memory   "
            << (cma.empty() ? "single copy (CMA)" : "copies through shared buffers") << "\n"
            << "  BLAS in use         " << blas << "\n"
            << "  cores               " << cores << "\n"
            << "  threads per rank    " << torch::get_num_threads()
            << " (OMP_NUM_THREADS=" << (omp ? omp : "unset")
            << ", MKL_NUM_THREADS=" << (mkl ? mkl : "unset") << ")\n"
            << "  matmul 512x512      " << gf << " GFLOP/s on one thread ("
            << model::cpu_gemm_in_use() << "; train.cpu_gemm = auto)\n";
  int warnings = 0;
  if (blas.find("openblas") == std::string::npos && blas.find("mkl") == std::string::npos) {
    std::cout << "warning: the BLAS in use (" << blas
              << ") is not an optimized one; run scripts/install-deps.sh (torch wheel with MKL)\n";
    ++warnings;
  }
  if (!cma.empty()) {
    std::cout << "warning: Open MPI cannot copy a message between two ranks of this machine in "
                 "one step: "
              << cma << "; pipeline steps ran 8-32% slower without it on a test machine\n";
    ++warnings;
  }
  if (!omp)
    std::cout << "note: OMP_NUM_THREADS is unset; `loom train --nproc` sets it to 1 per rank\n";
  std::cout << (warnings ? "doctor found problems\n" : "ok\n");
  return 0;
}

}  // namespace loom::cli

#pragma once
// A temporary path that is the same on every rank of a multi-rank test: rank 0's pid is
// broadcast on first use, so the first call is a collective on the world (make it on every
// rank, before any rank can return early). `tag` separates the runs of one test.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "loom/comm/world.h"

namespace loom::test {

inline std::string shared_tmp(const std::string& tag) {
  static int64_t id = [] {
    int64_t v = ::getpid();
    comm::world().broadcast(&v, 1, comm::DType::Int64, 0)->wait();
    return v;
  }();
  return (std::filesystem::temp_directory_path() / ("loom-" + tag + "-" + std::to_string(id)))
      .string();
}

}  // namespace loom::test

#pragma once
// Logging that names the rank: "[rank 3] message". Rank is set once after MPI starts.
#include <string>

namespace loom::log {

void set_rank(int rank);
int rank();
void info(const std::string& msg);   // stderr, every rank, prefixed
void warn(const std::string& msg);   // stderr, every rank, "warning:" prefixed
void info0(const std::string& msg);  // stderr, rank 0 only

}  // namespace loom::log

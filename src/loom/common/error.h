#pragma once
// Errors in loom come in two kinds (policy in docs/errors.md):
//  - UsageError: the user gave something wrong (config, flag, file). The CLI prints one line
//    that names the problem and the fix, and exits with code 2.
//  - Error: a runtime failure (communication timeout, a rank died). Exit code 1.
//  - AgreedError: a runtime failure that every rank reaches at the same point, decided on
//    values they all share (the step's all-reduced loss, the outcome of a save). One rank,
//    `reporter`, says it; the ranks end together, none killed. Exit code 1.
// LOOM_CHECK* macros guard invariants and print both operands when they break.
#include <sstream>
#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class UsageError : public Error {
 public:
  using Error::Error;
};

class AgreedError : public Error {
 public:
  AgreedError(const std::string& what, int reporter) : Error(what), reporter_(reporter) {}
  int reporter() const { return reporter_; }

 private:
  int reporter_;
};

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const std::string& what);

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace loom

#define LOOM_CHECK(cond, ...)                                                                     \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::loom::detail::check_failed(                                                               \
          __FILE__, __LINE__, ::loom::detail::concat("check failed: " #cond " ", ##__VA_ARGS__)); \
  } while (0)

#define LOOM_CHECK_OP(a, op, b, ...)                                                       \
  do {                                                                                     \
    const auto& loom_a_ = (a);                                                             \
    const auto& loom_b_ = (b);                                                             \
    if (!(loom_a_ op loom_b_))                                                             \
      ::loom::detail::check_failed(                                                        \
          __FILE__, __LINE__,                                                              \
          ::loom::detail::concat("check failed: " #a " " #op " " #b " (", loom_a_, " vs ", \
                                 loom_b_, ") ", ##__VA_ARGS__));                           \
  } while (0)

#define LOOM_CHECK_EQ(a, b, ...) LOOM_CHECK_OP(a, ==, b, ##__VA_ARGS__)
#define LOOM_CHECK_NE(a, b, ...) LOOM_CHECK_OP(a, !=, b, ##__VA_ARGS__)
#define LOOM_CHECK_LT(a, b, ...) LOOM_CHECK_OP(a, <, b, ##__VA_ARGS__)
#define LOOM_CHECK_LE(a, b, ...) LOOM_CHECK_OP(a, <=, b, ##__VA_ARGS__)
#define LOOM_CHECK_GE(a, b, ...) LOOM_CHECK_OP(a, >=, b, ##__VA_ARGS__)
#define LOOM_CHECK_GT(a, b, ...) LOOM_CHECK_OP(a, >, b, ##__VA_ARGS__)

// Throws UsageError with the streamed message.
#define LOOM_USAGE(...) throw ::loom::UsageError(::loom::detail::concat(__VA_ARGS__))

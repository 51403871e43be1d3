#include "loom/schedule/action.h"

#include <array>
#include <cctype>

#include "loom/common/error.h"

namespace loom::schedule {
namespace {

constexpr std::array<std::string_view, 11> kKindNames = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD", "REDUCE_GRAD",
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Parses a run of decimal digits; false on overflow past 9 digits (no schedule is that big).
bool parse_int(std::string_view digits, int* out) {
  if (digits.empty() || digits.size() > 9) return false;
  int v = 0;
  for (char c : digits) v = v * 10 + (c - '0');
  *out = v;
  return true;
}

[[noreturn]] void bad_action(std::string_view text, std::string_view why) {
  LOOM_USAGE("bad action '", text, "': ", why,
             "; expected <stage><KIND>[<microbatch>] like 2F0, 1SEND_B3 or 0UNSHARD "
             "(kinds F B I W SEND_F RECV_F SEND_B RECV_B UNSHARD RESHARD REDUCE_GRAD)");
}

}  // namespace

std::string_view kind_name(Kind k) {
  return kKindNames.at(static_cast<size_t>(k));
}

std::optional<Kind> parse_kind(std::string_view name) {
  for (size_t i = 0; i < kKindNames.size(); ++i)
    if (kKindNames[i] == name) return static_cast<Kind>(i);
  return std::nullopt;
}

bool is_compute(Kind k) {
  return k == Kind::F || k == Kind::B || k == Kind::I || k == Kind::W;
}

bool is_p2p(Kind k) {
  return k == Kind::SEND_F || k == Kind::RECV_F || k == Kind::SEND_B || k == Kind::RECV_B;
}

bool is_stage_level(Kind k) {
  return k == Kind::UNSHARD || k == Kind::RESHARD || k == Kind::REDUCE_GRAD;
}

std::string to_string(const Action& a) {
  std::string out = std::to_string(a.stage);
  out += kind_name(a.kind);
  if (a.microbatch != kNoMicrobatch) out += std::to_string(a.microbatch);
  return out;
}

Action parse_action(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && is_digit(text[i])) ++i;
  Action a;
  if (!parse_int(text.substr(0, i), &a.stage))
    bad_action(text, i == 0 ? "no stage number in front" : "stage number too large");
  size_t k = i;
  // Kind names are upper-case letters and '_' (SEND_F); digits after them are the micro-batch.
  while (k < text.size() && (std::isupper(static_cast<unsigned char>(text[k])) || text[k] == '_'))
    ++k;
  std::string_view kind_text = text.substr(i, k - i);
  std::optional<Kind> kind = parse_kind(kind_text);
  if (!kind) bad_action(text, kind_text.empty() ? "no kind" : "unknown kind");
  a.kind = *kind;
  std::string_view mb_text = text.substr(k);
  if (is_stage_level(a.kind)) {
    if (!mb_text.empty()) bad_action(text, "stage-level kinds take no micro-batch");
    a.microbatch = kNoMicrobatch;
  } else {
    for (char c : mb_text)
      if (!is_digit(c)) bad_action(text, "micro-batch must be a number");
    if (!parse_int(mb_text, &a.microbatch))
      bad_action(text, mb_text.empty() ? "missing micro-batch number" : "micro-batch too large");
  }
  return a;
}

}  // namespace loom::schedule

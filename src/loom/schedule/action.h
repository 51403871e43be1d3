#pragma once
// An action is one thing a pipeline rank does: (stage, kind, micro-batch), printed like "2F0".
// Compute kinds come from generators; communication and data-parallel kinds are added by
// lowering (lower.h). Text form: <stage><KIND>[<microbatch>], e.g. "2F0", "1SEND_B3",
// "0UNSHARD" (stage-level actions have no micro-batch).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom::schedule {

enum class Kind : uint8_t {
  F,            // forward of one micro-batch through the stage
  B,            // full backward (inputs and weights)
  I,            // backward for the stage's input only
  W,            // backward for the stage's weights only (I then W == B)
  SEND_F,       // send the stage's output activation to stage+1 (on another rank)
  RECV_F,       // receive the stage's input activation from stage-1
  SEND_B,       // send the gradient of the stage's input to stage-1
  RECV_B,       // receive the gradient of the stage's output from stage+1
  UNSHARD,      // all-gather the stage's parameters (sharded data parallelism)
  RESHARD,      // free the gathered parameters
  REDUCE_GRAD,  // all-reduce / reduce-scatter the stage's gradients (last backward done)
};

constexpr int kNoMicrobatch = -1;

struct Action {
  int stage = 0;
  Kind kind = Kind::F;
  int microbatch = kNoMicrobatch;  // kNoMicrobatch for UNSHARD / RESHARD / REDUCE_GRAD

  friend bool operator==(const Action&, const Action&) = default;
};

std::string_view kind_name(Kind k);                // "F", "SEND_F", ...
std::optional<Kind> parse_kind(std::string_view);  // inverse of kind_name
bool is_compute(Kind k);                           // F, B, I, W
bool is_p2p(Kind k);                               // SEND_*, RECV_*
// loom's executor posts the receives of the actions up to this many ahead of the one it runs
// (their buffers exist from then on); the simulator holds their memory alike.
inline constexpr size_t kRecvLookahead = 8;
bool is_stage_level(Kind k);  // UNSHARD, RESHARD, REDUCE_GRAD

std::string to_string(const Action& a);  // "2F0"
// Parses "2F0"; throws loom::UsageError naming the text and the expected form.
Action parse_action(std::string_view text);

}  // namespace loom::schedule

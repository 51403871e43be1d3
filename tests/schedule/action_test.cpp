#include "loom/schedule/action.h"

#include <gtest/gtest.h>

#include <utility>

#include "loom/common/error.h"

namespace loom::schedule {
namespace {

TEST(Action, PrintsAndParsesEveryKind) {
  for (int k = 0; k <= static_cast<int>(Kind::REDUCE_GRAD); ++k) {
    Kind kind = static_cast<Kind>(k);
    EXPECT_EQ(parse_kind(kind_name(kind)), kind);
    Action a{12, kind, is_stage_level(kind) ? kNoMicrobatch : 7};
    EXPECT_EQ(parse_action(to_string(a)), a) << to_string(a);
  }
  EXPECT_EQ(to_string({2, Kind::F, 0}), "2F0");
  EXPECT_EQ(to_string({1, Kind::SEND_B, 3}), "1SEND_B3");
  EXPECT_EQ(to_string({0, Kind::UNSHARD, kNoMicrobatch}), "0UNSHARD");
  EXPECT_EQ(parse_action("10REDUCE_GRAD"), (Action{10, Kind::REDUCE_GRAD, kNoMicrobatch}));
  EXPECT_FALSE(parse_kind("X").has_value());
}

TEST(Action, Categories) {
  EXPECT_TRUE(is_compute(Kind::W));
  EXPECT_FALSE(is_compute(Kind::SEND_F));
  EXPECT_TRUE(is_p2p(Kind::RECV_B));
  EXPECT_FALSE(is_p2p(Kind::UNSHARD));
  EXPECT_TRUE(is_stage_level(Kind::RESHARD));
  EXPECT_FALSE(is_stage_level(Kind::B));
}

TEST(Action, RejectsBadText) {
  for (const char* bad : {"", "F0", "0X0", "0F", "0UNSHARD1", "0F0x", "-1F0", "0f0", "0SEND_F",
                          "0F 0", "1234567890F0"}) {
    try {
      parse_action(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Action, NamesWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {{"F0", "no stage number in front"},
                                                       {"99999999999F0", "stage number too large"},
                                                       {"0F", "missing micro-batch number"},
                                                       {"0F99999999999", "micro-batch too large"}};
  for (const auto& [bad, why] : cases) {
    try {
      parse_action(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace loom::schedule

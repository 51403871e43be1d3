// The one flag parser: the same rules for every command (no torch, no MPI).
#include "loom/flags/flags.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "loom/common/error.h"

namespace loom::flags {
namespace {

const Spec kSimulate{"simulate",
                     {{"layers", "24"},
                      {"seq-len", "2048"},
                      {"dp-mode", "zero3"},
                      {"json", ""},
                      {"comm-child", "FILE", true}}};

// The UsageError message of fn, checked to be one line; "" when nothing was thrown.
std::string usage_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UsageError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    return msg;
  }
  return "";
}

std::string parse_error(const std::vector<std::string>& args, const Spec& spec = kSimulate) {
  return usage_error([&] { parse(args, spec); });
}

TEST(Flags, SpaceAndEqualsForms) {
  Parsed p = parse({"--layers", "4", "--seq-len=16", "--dp-mode=a=b"}, kSimulate);
  EXPECT_EQ(p.get("layers"), "4");
  EXPECT_EQ(p.get("seq-len"), "16");
  EXPECT_EQ(p.get("dp-mode"), "a=b");  // only the first '=' splits
  EXPECT_FALSE(p.has("json"));
  EXPECT_EQ(p.get("json", "no"), "no");
  EXPECT_FALSE(p.help);
}

TEST(Flags, DashAndUnderscoreAreTheSame) {
  Parsed p = parse({"--seq_len", "8", "--dp_mode", "zero1"}, kSimulate);
  EXPECT_EQ(p.get("seq-len"), "8");
  EXPECT_EQ(p.get("dp-mode"), "zero1");
  ASSERT_EQ(p.items.size(), 2u);
  EXPECT_EQ(p.items[0].spelled, "seq_len");  // messages name the flag as typed
}

TEST(Flags, LaterFlagsWinAndOrderIsKept) {
  Parsed p = parse({"--layers", "4", "--json", "--layers=6"}, kSimulate);
  EXPECT_EQ(p.get("layers"), "6");
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_EQ(p.items[1].name, "json");
  EXPECT_EQ(p.items[1].value, "");
}

TEST(Flags, ValuesMayStartWithOneDash) {
  EXPECT_EQ(parse({"--layers", "-1"}, kSimulate).get("layers"), "-1");
  EXPECT_EQ(parse({"--layers=--odd"}, kSimulate).get("layers"), "--odd");
}

TEST(Flags, HelpWinsWhereverItIs) {
  for (const char* h : {"-h", "--help"}) {
    EXPECT_TRUE(parse({h}, kSimulate).help);
    EXPECT_TRUE(parse({"--layers", "4", h}, kSimulate).help);
    // The rest of the input is not checked.
    EXPECT_TRUE(parse({"--bogus", "1", h}, kSimulate).help);
    EXPECT_TRUE(parse({"--layers", h}, kSimulate).help);
    EXPECT_TRUE(parse({h}, Spec{"doctor", {}}).help);
  }
}

TEST(Flags, UnknownFlagSuggestsTheClosest) {
  EXPECT_EQ(parse_error({"--layer", "4"}),
            "unknown flag '--layer' for loom simulate; did you mean '--layers'?");
  EXPECT_EQ(parse_error({"--seqlen=4"}),
            "unknown flag '--seqlen' for loom simulate; did you mean '--seq-len'?");
  EXPECT_EQ(parse_error({"--zzzzzzzz"}),
            "unknown flag '--zzzzzzzz' for loom simulate; see loom "
            "simulate --help");
  // Internal flags are accepted but never suggested.
  EXPECT_EQ(parse({"--comm-child", "f"}, kSimulate).get("comm-child"), "f");
  EXPECT_EQ(parse_error({"--comm-chil", "f"}).find("comm-child"), std::string::npos);
  EXPECT_EQ(parse_error({"--layers=a\nb", "--x\ny"}),
            "unknown flag '--x\\ny' for loom simulate; see loom simulate --help");
  EXPECT_EQ(parse_error({"--x"}, Spec{}), "unknown flag '--x'; see --help");
}

TEST(Flags, MissingValue) {
  EXPECT_EQ(parse_error({"--layers"}), "flag --layers needs a value, e.g. --layers 24");
  EXPECT_EQ(parse_error({"--seq_len", "--json"}),
            "flag --seq_len needs a value, e.g. --seq_len 2048");
  EXPECT_EQ(parse_error({"--layers", "--", "4"}), "flag --layers needs a value, e.g. --layers 24");
}

TEST(Flags, SwitchesTakeNoValue) {
  EXPECT_TRUE(parse({"--json"}, kSimulate).has("json"));
  EXPECT_EQ(parse_error({"--json=yes"}), "flag --json takes no value; drop the '=yes'");
}

TEST(Flags, StrayWords) {
  EXPECT_EQ(parse_error({"--layers", "4", "8"}),
            "unexpected argument '8' for loom simulate; flags look like --name value or "
            "--name=value");
  EXPECT_NE(parse_error({"-layers", "4"}).find("unexpected argument '-layers'"), std::string::npos);
  EXPECT_NE(parse_error({"--"}).find("unexpected argument '--'"), std::string::npos);
}

TEST(Flags, FirstProblemIsReported) {
  EXPECT_EQ(parse_error({"--layer", "4", "--bogus"}),
            "unknown flag '--layer' for loom simulate; did you mean '--layers'?");
}

// loom launch: its flags end at "--" or at the first word that is no flag's value.
TEST(Flags, StopAtWord) {
  Spec launch{"launch", {{"nproc", "2"}, {"comm", "gloo"}}};
  launch.stop_at_word = true;
  Parsed p = parse({"--nproc", "2", "prog", "--help", "x"}, launch);
  EXPECT_EQ(p.get("nproc"), "2");
  EXPECT_FALSE(p.help);  // the command's own --help
  EXPECT_EQ(p.rest, (std::vector<std::string>{"prog", "--help", "x"}));
  p = parse({"--nproc=2", "--comm", "gloo", "--", "--prog", "-h"}, launch);
  EXPECT_EQ(p.get("comm"), "gloo");
  EXPECT_EQ(p.rest, (std::vector<std::string>{"--prog", "-h"}));
  EXPECT_TRUE(parse({"-h", "prog"}, launch).help);
  EXPECT_TRUE(parse({"--nproc", "2"}, launch).rest.empty());
  EXPECT_EQ(parse_error({"--nprocs", "2", "prog"}, launch),
            "unknown flag '--nprocs' for loom launch; did you mean '--nproc'?");
}

// Flags named by a table elsewhere (loom train: the configuration fields).
TEST(Flags, Source) {
  Source fields{[](const std::string& name) -> std::optional<Flag> {
                  if (name == "kind") throw UsageError("flag --kind is ambiguous");
                  if (name == "layers" || name == "model.layers") return Flag{"model.layers", "4"};
                  return std::nullopt;
                },
                [](const std::string& name) {
                  return name == "layer" ? std::vector<std::string>{"layers", "model.layers"}
                                         : std::vector<std::string>{};
                }};
  Spec train{"train", {{"nproc", "4"}, {"config", "x.toml"}}, &fields};
  Parsed p = parse({"--nproc", "2", "--model.layers", "3", "--layers=5"}, train);
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_FALSE(p.items[0].from_source);
  EXPECT_TRUE(p.items[1].from_source);
  EXPECT_EQ(p.items[1].spelled, "model.layers");
  EXPECT_EQ(p.get("model.layers"), "5");
  EXPECT_EQ(parse_error({"--kind", "gpt"}, train), "flag --kind is ambiguous");
  EXPECT_EQ(parse_error({"--layer", "2"}, train),
            "unknown flag '--layer' for loom train; did you mean '--layers' or '--model.layers'?");
  EXPECT_EQ(parse_error({"--nprc", "2"}, train),
            "unknown flag '--nprc' for loom train; did you mean '--nproc'?");
  EXPECT_EQ(parse_error({"--layers"}, train), "flag --layers needs a value, e.g. --layers 4");
}

TEST(Flags, Numbers) {
  EXPECT_EQ(to_int("pp", "4", 1, 8), 4);
  EXPECT_EQ(to_int64("global-batch", "1099511627776", 1, int64_t(1) << 41), int64_t(1) << 40);
  EXPECT_EQ(usage_error([] { to_int("nproc", "zero", 1, 4096); }),
            "--nproc must be an integer in [1, 4096], got 'zero'");
  EXPECT_NE(usage_error([] { to_int("pp", "9", 1, 8); }).find("got '9'"), std::string::npos);
  EXPECT_NE(usage_error([] { to_int("pp", "", 1, 8); }).find("got ''"), std::string::npos);
  EXPECT_NE(usage_error([] { to_int("pp", "2x", 1, 8); }).find("got '2x'"), std::string::npos);
}

TEST(Flags, Lists) {
  EXPECT_EQ(split_list("1,2,4"), (std::vector<std::string>{"1", "2", "4"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_TRUE(split_list(",").empty());  // names nothing: the caller says so with its flag
  // A doubled comma is a typo (a value left out), not a list of three.
  EXPECT_NE(usage_error([] { split_list("1,2,,4"); }).find("'1,2,,4' has an empty item"),
            std::string::npos);
  EXPECT_NE(usage_error([] { split_list(",1"); }).find("empty item"), std::string::npos);
}

}  // namespace
}  // namespace loom::flags

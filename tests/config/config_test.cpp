// Config schema: defaults, TOML loading, flags, errors (one line each), round trip, units.
#include "loom/config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "loom/common/error.h"
#include "loom/flags/flags.h"

namespace loom::config {
namespace {

// Runs `fn`, expects a UsageError whose message is one line containing every part.
void expect_usage(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const UsageError& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    for (const auto& part : parts) {
      EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected UsageError, got: " << e.what();
    return;
  }
  ADD_FAILURE() << "expected UsageError containing '" << (parts.empty() ? "" : parts[0]) << "'";
}

void expect_toml_error(const std::string& toml, const std::vector<std::string>& parts) {
  SCOPED_TRACE(toml);
  expect_usage([&] { from_toml_string(toml, "x.toml"); }, parts);
}

void expect_flag_error(const std::vector<std::string>& args,
                       const std::vector<std::string>& parts) {
  SCOPED_TRACE(args.empty() ? "" : args[0]);
  expect_usage(
      [&] {
        Config c;
        apply_overrides(c, args);
      },
      parts);
}

// Parses and validates, as the CLI does.
void expect_invalid(const std::string& toml, const std::vector<std::string>& parts) {
  SCOPED_TRACE(toml);
  expect_usage([&] { validate(from_toml_string(toml, "x.toml")); }, parts);
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("loom_config_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
              ".toml"))
                .string();
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Config, DefaultsComeFromTheStructs) {
  Config c = from_toml_string("");
  EXPECT_EQ(c, Config{});
  EXPECT_NO_THROW(validate(c));
  EXPECT_EQ(c.model.kind, config::ModelKind::Gpt);
  EXPECT_EQ(c.train.seed, 1234u);

  std::map<std::string, FieldInfo> by_key;
  for (const auto& f : fields()) by_key[f.section + "." + f.name] = f;
  EXPECT_EQ(by_key.at("model.layers").default_value, "4");
  EXPECT_EQ(by_key.at("model.layers").type, "int");
  EXPECT_EQ(by_key.at("model.kind").default_value, "\"gpt\"");
  EXPECT_EQ(by_key.at("train.lr").default_value, "0.0003");
  EXPECT_EQ(by_key.at("train.lr").type, "float");
  EXPECT_EQ(by_key.at("parallel.bucket_mib").default_value, "25.0");
  EXPECT_EQ(by_key.at("output.progress").type, "bool");
  EXPECT_EQ(by_key.at("data.path").type, "string");
  EXPECT_EQ(by_key.at("train.seed").type, "int");
  EXPECT_NE(
      by_key.at("parallel.schedule").help.find("gpipe|1f1b|interleaved|bfs|zb-h1|zbv|dualpipev"),
      std::string::npos);
  EXPECT_NE(by_key.at("model.layers").help.find("1..1048576"), std::string::npos);
  EXPECT_NE(by_key.at("train.steps").help.find(">= 0"), std::string::npos);
}

TEST(Config, FieldsDescribeEveryMember) {
  std::set<std::string> types = {"int", "float", "string", "bool"};
  std::set<std::string> keys;
  for (const auto& f : fields()) {
    EXPECT_TRUE(types.count(f.type)) << f.name << ": " << f.type;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(f.help.find('\n'), std::string::npos) << f.name;
    EXPECT_TRUE(keys.insert(f.section + "." + f.name).second) << "listed twice: " << f.name;
  }
  // One per member of the structs in config.h; update when a field is added.
  EXPECT_EQ(fields().size(), 13u + 5u + 23u + 16u + 6u + 5u + 8u + 3u + 2u + 12u);
}

TEST(Config, FullFile) {
  const std::string text = R"(
# every section
[model]
kind = "mlp"
vocab = 512
seq_len = 32
width = 96
layers = 3
heads = 6
classes = 5

[data]
kind = "synthetic"
path = "/tmp/data"
synthetic_size = 1000
test_fraction = 0.25

[train]
steps = 10
global_batch = 16
microbatches = 4
optimizer = "sgd"
lr = 1           # an integer is fine for a float
min_lr = 1e-5
warmup = 3
lr_schedule = "constant"
momentum = 0.5
weight_decay = 0.01
beta1 = 0.8
beta2 = 0.99
eps = 1e-6
clip = 1.5
eval_every = 5
eval_batches = 2
seed = 42
threads = 2

[parallel]
dp = 2
pp = 4
loops = 2
schedule = "interleaved"
schedule_file = "s.csv"
partition = "2, 5,9"
dp_mode = "zero3"
bucket_mib = 4.5
reshard_after_forward = false
max_unsharded = 3

[slim]
core = 0.3
explore = 0.2
period = 2
refresh = 5
lambda = 0.5
full_sync = 4

[quant]
bits = 4
block = 64

[emulate]
bandwidth = "10Gbit"
latency = "50us"

[output]
dir = "runs/x"
checkpoint_every = 7
progress = false
resume = "runs/old/step-5"
trace = "trace.json"
)";
  TempFile file(text);
  Config c = load_file(file.path());
  EXPECT_NO_THROW(validate(c));
  // Every value of the file; the fields it leaves out (train.on_nan, parallel.comm,
  // output.keep, output.overwrite, output.calibrate_every) keep their defaults.
  Config want;
  want.model = {.kind = ModelKind::Mlp,
                .vocab = 512,
                .seq_len = 32,
                .width = 96,
                .layers = 3,
                .heads = 6,
                .classes = 5};
  want.data = {.kind = DataKind::Synthetic,
               .path = "/tmp/data",
               .tokenizer = "",
               .synthetic_size = 1000,
               .test_fraction = 0.25};
  want.train = {.steps = 10,
                .global_batch = 16,
                .microbatches = 4,
                .optimizer = Optimizer::Sgd,
                .lr = 1.0,
                .min_lr = 1e-5,
                .warmup = 3,
                .lr_schedule = LrSchedule::Constant,
                .momentum = 0.5,
                .weight_decay = 0.01,
                .beta1 = 0.8,
                .beta2 = 0.99,
                .eps = 1e-6,
                .clip = 1.5,
                .eval_every = 5,
                .eval_batches = 2,
                .seed = 42,
                .threads = 2,
                .on_nan = NanPolicy::Stop};
  want.parallel = {.dp = 2,
                   .pp = 4,
                   .loops = 2,
                   .schedule = "interleaved",
                   .schedule_file = "s.csv",
                   .partition = "2, 5,9",
                   .dp_mode = DpMode::Zero3,
                   .bucket_mib = 4.5,
                   .reshard_after_forward = false,
                   .max_unsharded = 3};
  want.slim = {
      .core = 0.3, .explore = 0.2, .period = 2, .refresh = 5, .lambda = 0.5, .full_sync = 4};
  want.quant = {.bits = 4, .block = 64};
  want.emulate = {.bandwidth = "10Gbit", .latency = "50us"};
  want.output = {.dir = "runs/x",
                 .checkpoint_every = 7,
                 .progress = false,
                 .resume = "runs/old/step-5",
                 .trace = "trace.json",
                 .calibrate_every = 0};
  EXPECT_EQ(c, want) << to_toml(c);
}

TEST(Config, InlineTablesAndDottedKeysWork) {
  Config c = from_toml_string("model = { layers = 6 }\ntrain.steps = 9\n");
  EXPECT_EQ(c.model.layers, 6);
  EXPECT_EQ(c.train.steps, 9);
}

TEST(ConfigErrors, MissingFile) {
  expect_usage([] { load_file("x.toml"); },
               {"config file 'x.toml' not found; pass an existing file to --config"});
  expect_usage([] { load_file(std::filesystem::temp_directory_path().string()); },
               {"is a directory", "--config"});
}

TEST(ConfigErrors, ParseErrorHasFileLineAndColumn) {
  expect_toml_error("[model]\nlayers = = 4\n", {"x.toml", "line 2", "column 10", "parse"});
  expect_toml_error("[model]\nlayers = 4\nlayers = 5\n", {"x.toml", "line 3", "layers"});
  TempFile file("[train]\nlr = 1e-3\nsteps = \"unterminated\n");
  expect_usage([&] { load_file(file.path()); }, {file.path(), "line 3", "column"});
}

TEST(ConfigErrors, UnknownSectionOrField) {
  expect_toml_error("[model]\nlayer = 4\n",
                    {"unknown field 'model.layer' in x.toml; did you mean 'model.layers'?"});
  expect_toml_error("[modle]\nlayers = 4\n",
                    {"unknown section [modle] in x.toml; did you mean [model]?"});
  expect_toml_error("[zzzzzz]\n", {"unknown section [zzzzzz]", "model, data, train"});
  // A real name in the wrong section: point at the right one.
  expect_toml_error("[model]\nlr = 0.1\n", {"'model.lr'", "did you mean 'train.lr'?"});
  expect_toml_error("[train]\noptimiser = \"sgd\"\n", {"did you mean 'train.optimizer'?"});
  expect_toml_error("[train]\nbatch = 8\n", {"did you mean 'train.global_batch'?"});
  expect_toml_error("[quant]\nqqqqqqqq = 1\n",
                    {"'quant.qqqqqqqq'", "fields of [quant]", "bits, block"});
  // Keys above every [section].
  expect_toml_error("layers = 4\n",
                    {"unknown field 'layers'", "belong in a section", "'model.layers'"});
  expect_toml_error("kind = \"gpt\"\n", {"'model.kind' or 'data.kind'"});
  expect_toml_error("[model.extra]\nx = 1\n", {"unknown field 'model.extra'"});
  expect_toml_error("model = 3\n", {"model must be a section [model], got 3"});
}

TEST(ConfigErrors, WrongType) {
  expect_toml_error("[model]\nlayers = \"four\"\n",
                    {"model.layers must be an integer, got \"four\"", "x.toml", "line 2"});
  expect_toml_error("[model]\nlayers = 4.0\n", {"model.layers must be an integer, got 4.0"});
  expect_toml_error("[train]\nlr = \"fast\"\n", {"train.lr must be a number, got \"fast\""});
  expect_toml_error("[train]\nlr = nan\n", {"train.lr must be a number, got nan"});
  expect_toml_error("[train]\nseed = -1\n", {"train.seed must be a non-negative integer"});
  expect_toml_error("[output]\nprogress = 1\n", {"output.progress must be true or false"});
  expect_toml_error("[output]\ndir = 3\n", {"output.dir must be a string, got 3"});
  expect_toml_error("[model]\nkind = [\"gpt\"]\n",
                    {"model.kind must be one of gpt|mlp|cnn|llama, got an array"});
  expect_toml_error("[data]\npath = \"a\\nb\"\nkind = 1\n",
                    {"data.kind must be one of text|fashion-mnist|synthetic, got 1"});
}

TEST(ConfigErrors, OutOfRange) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"[model]\nlayers = 0", "model.layers must be in 1..1048576, got 0"},
      {"[model]\nlayers = 9223372036854775807", "model.layers must be in 1..1048576"},
      {"[model]\nwidth = 0", "model.width must be in 1..16777216"},
      {"[model]\nheads = 0", "model.heads must be in 1..16777216"},
      {"[model]\nseq_len = 0", "model.seq_len must be in 1..16777216"},
      {"[model]\nvocab = 1", "model.vocab must be in 2..65536, got 1"},
      {"[model]\nvocab = 65537", "model.vocab must be in 2..65536"},
      {"[model]\nclasses = 1", "model.classes must be >= 2"},
      {"[model]\nkind = \"rnn\"", "model.kind must be one of gpt|mlp|cnn|llama, got 'rnn'"},
      {"[data]\nkind = \"mnist\"", "data.kind must be one of text|fashion-mnist|synthetic"},
      {"[data]\ntest_fraction = 0", "data.test_fraction must be in (0, 1), got 0"},
      {"[data]\ntest_fraction = 1", "data.test_fraction must be in (0, 1)"},
      {"[data]\nsynthetic_size = 0", "data.synthetic_size must be in 1..67108864"},
      {"[train]\nsteps = -1", "train.steps must be >= 0, got -1"},
      {"[train]\nglobal_batch = 0", "train.global_batch must be >= 1"},
      {"[train]\nmicrobatches = 0", "train.microbatches must be in 1..1048576"},
      {"[train]\nmicrobatches = 4294967296", "train.microbatches must be in 1..1048576"},
      {"[train]\nsteps = 4294967296", "train.steps must be at most 2147483647"},
      {"[train]\nlr = 0", "train.lr must be > 0, got 0"},
      {"[train]\nmin_lr = -0.1", "train.min_lr must be >= 0, got -0.1"},
      {"[train]\nwarmup = -1", "train.warmup must be >= 0"},
      {"[train]\nmomentum = 1.0", "train.momentum must be in [0, 1), got 1"},
      {"[train]\nweight_decay = -1", "train.weight_decay must be >= 0"},
      {"[train]\nbeta1 = 1", "train.beta1 must be in [0, 1)"},
      {"[train]\nbeta2 = -0.5", "train.beta2 must be in [0, 1)"},
      {"[train]\neps = 0", "train.eps must be > 0"},
      {"[train]\nclip = -1", "train.clip must be >= 0"},
      {"[train]\neval_every = -1", "train.eval_every must be >= 0"},
      {"[train]\neval_batches = 0", "train.eval_batches must be >= 1"},
      {"[train]\nthreads = 0", "train.threads must be in 1..1024"},
      {"[train]\noptimizer = \"adam\"", "train.optimizer must be one of adamw|sgd, got 'adam'"},
      {"[train]\nlr_schedule = \"step\"", "train.lr_schedule must be one of cosine|constant"},
      {"[parallel]\ndp = -1", "parallel.dp must be in 0..1048576"},
      {"[parallel]\npp = 0", "parallel.pp must be in 1..1048576"},
      {"[parallel]\npp = 4294967297", "parallel.pp must be in 1..1048576"},
      {"[parallel]\nloops = 0", "parallel.loops must be in 1..1048576"},
      {"[parallel]\nschedule = \"foo\"",
       "parallel.schedule must be one of gpipe|1f1b|interleaved|bfs|zb-h1|zbv|dualpipev, got "
       "'foo'"},
      {"[parallel]\ndp_mode = \"zero4\"",
       "parallel.dp_mode must be one of allreduce|zero1|zero2|zero3|slim|quant"},
      {"[parallel]\nbucket_mib = 0", "parallel.bucket_mib must be > 0"},
      {"[parallel]\nmax_unsharded = 0", "parallel.max_unsharded must be in 1..1048576"},
      {"[parallel]\npartition = \"5,2\"", "parallel.partition must be flops|uniform or"},
      {"[parallel]\npartition = \"2,,5\"", "got '2,,5'"},
      {"[parallel]\npartition = \"2,5,\"", "got '2,5,'"},
      {"[parallel]\npartition = \"-1,3\"", "got '-1,3'"},
      {"[parallel]\npartition = \"\"", "parallel.partition must be"},
      {"[parallel]\npartition = \"flop\"", "got 'flop'"},
      {"[slim]\ncore = 1.5", "slim.core must be in [0, 1], got 1.5"},
      {"[slim]\nexplore = -0.1", "slim.explore must be in [0, 1]"},
      {"[slim]\nperiod = 0", "slim.period must be >= 1"},
      {"[slim]\nrefresh = 0", "slim.refresh must be >= 1"},
      {"[slim]\nlambda = -1", "slim.lambda must be >= 0"},
      {"[slim]\nfull_sync = -1", "slim.full_sync must be >= 0"},
      {"[quant]\nbits = 6", "quant.bits must be one of 2|3|4|8, got 6"},
      {"[quant]\nblock = 0", "quant.block must be >= 1"},
      {"[emulate]\nbandwidth = \"fast\"", "emulate.bandwidth must be empty or a bandwidth"},
      {"[emulate]\nlatency = \"soon\"", "emulate.latency must be empty or a duration"},
      {"[output]\ndir = \"\"", "output.dir must be a non-empty path, got ''"},
      {"[output]\ncheckpoint_every = -2", "output.checkpoint_every must be >= 0"},
  };
  for (const auto& [toml, message] : cases) {
    expect_toml_error(toml, {message, "(in x.toml, line 2)"});
  }
  EXPECT_NO_THROW(from_toml_string("[parallel]\npartition = \"0, 3,7\""));
  EXPECT_NO_THROW(from_toml_string("[parallel]\npartition = \"uniform\""));
  EXPECT_NO_THROW(from_toml_string("[emulate]\nbandwidth = \"1Gbps\"\nlatency = \"1ms\""));
  EXPECT_NO_THROW(from_toml_string("[train]\nseed = 9223372036854775807"));
}

TEST(ConfigErrors, ValidateChecksFieldsOfAHandBuiltConfig) {
  Config c;
  c.model.layers = 0;
  expect_usage([&] { validate(c); }, {"model.layers must be in 1..1048576, got 0"});
  c = Config{};
  c.parallel.schedule = "foo";
  expect_usage([&] { validate(c); }, {"parallel.schedule must be one of", "got 'foo'"});
  c = Config{};
  c.train.seed = ~uint64_t{0};
  expect_usage([&] { validate(c); }, {"train.seed must be at most 2^63-1"});
  c = Config{};
  c.output.dir.clear();
  expect_usage([&] { validate(c); }, {"output.dir must be a non-empty path"});
}

TEST(ConfigErrors, CrossFieldRules) {
  expect_invalid("[model]\nwidth = 128\nheads = 3\n",
                 {"model.heads (3) must divide model.width (128)", "use heads 2 or 4"});
  expect_invalid("[model]\nwidth = 7\nheads = 8\n", {"use heads 7,", "change width"});
  // heads only matter for gpt.
  EXPECT_NO_THROW(validate(from_toml_string(
      "[model]\nkind = \"mlp\"\nwidth = 100\nheads = 3\n[data]\nkind = \"synthetic\"\n")));
  expect_invalid("[slim]\ncore = 0.7\nexplore = 0.5\n",
                 {"slim.core + slim.explore must be in (0, 1], got 0.7 + 0.5 = 1.2", "lower"});
  expect_invalid("[slim]\ncore = 0\nexplore = 0\n", {"slim.core + slim.explore", "raise"});
  EXPECT_NO_THROW(validate(from_toml_string("[slim]\ncore = 0.6\nexplore = 0.4\n")));
  expect_invalid("[data]\nkind = \"fashion-mnist\"\n",
                 {"model.kind 'gpt'", "data.kind 'fashion-mnist'", "text|synthetic"});
  expect_invalid("[model]\nkind = \"cnn\"\n",
                 {"model.kind 'cnn'", "data.kind 'text'", "fashion-mnist|synthetic"});
  expect_invalid("[model]\nkind = \"mlp\"\n", {"model.kind 'mlp'", "data.kind 'text'"});
  for (ModelKind model : {ModelKind::Gpt, ModelKind::Mlp, ModelKind::Cnn}) {
    Config c;
    c.model.kind = model;
    c.data.kind = config::DataKind::Synthetic;
    EXPECT_NO_THROW(validate(c)) << model;
  }
}

TEST(ConfigFlags, AllThreeFormsOverrideTheFile) {
  TempFile file("[model]\nlayers = 2\nwidth = 64\nheads = 2\n[train]\nlr = 0.5\n");
  Config c = load_file(file.path());
  apply_overrides(c, {"--layers", "4", "--model.width", "96", "--heads=3", "--train.lr=1e-3",
                      "--progress", "false", "--data.path="});
  EXPECT_EQ(c.model.layers, 4);
  EXPECT_EQ(c.model.width, 96);
  EXPECT_EQ(c.model.heads, 3);
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-3);
  EXPECT_FALSE(c.output.progress);
  EXPECT_EQ(c.data.path, "");
  EXPECT_NO_THROW(validate(c));
  // Later flags win; a value may contain '='.
  apply_overrides(c, {"--layers", "5", "--layers=6", "--output.trace=a=b.json"});
  EXPECT_EQ(c.model.layers, 6);
  EXPECT_EQ(c.output.trace, "a=b.json");
  // A value starting with "--" needs the = form.
  apply_overrides(c, {"--data.path=--odd"});
  EXPECT_EQ(c.data.path, "--odd");
}

TEST(ConfigFlags, Errors) {
  expect_flag_error({"--layers"}, {"flag --layers needs a value", "e.g. --layers 4"});
  expect_flag_error({"--layers", "--heads", "4"}, {"flag --layers needs a value"});
  {  // A true|false flag alone means true.
    Config b;
    b.output.progress = false;
    apply_overrides(b, {"--progress", "--overwrite", "--keep", "3"});
    EXPECT_TRUE(b.output.progress);
    EXPECT_TRUE(b.output.overwrite);
    apply_overrides(b, {"--overwrite", "false", "--progress=false"});
    EXPECT_FALSE(b.output.overwrite);
    EXPECT_FALSE(b.output.progress);
  }
  expect_flag_error({"--layer", "4"}, {"unknown flag '--layer'; did you mean '--layers'?"});
  expect_flag_error({"--model.layer=4"}, {"did you mean '--model.layers'?"});
  expect_flag_error({"--modle.layers=4"}, {"did you mean '--model.layers'?"});
  expect_flag_error({"--model.lr=4"}, {"did you mean '--train.lr'?"});
  expect_flag_error({"--zzzzzzzz", "1"}, {"unknown flag '--zzzzzzzz'", "--help"});
  expect_flag_error({"--knd", "gpt"}, {"'--model.kind' or '--data.kind'"});
  expect_flag_error({"--layers", "four"},
                    {"model.layers must be an integer, got 'four'", "(from flag --layers)"});
  expect_flag_error({"--layers=4.5"}, {"model.layers must be an integer, got '4.5'"});
  expect_flag_error({"--layers="}, {"model.layers must be an integer, got ''"});
  // A negative number is a value, not a flag.
  expect_flag_error({"--steps", "-1"}, {"train.steps must be >= 0, got -1"});
  expect_flag_error({"--layers", "0"}, {"model.layers must be in 1..1048576, got 0", "--layers"});
  expect_flag_error({"--lr", "inf"}, {"train.lr must be a number"});
  expect_flag_error({"--seed", "-3"}, {"train.seed must be a non-negative integer"});
  expect_flag_error({"--seed", "18446744073709551615"}, {"train.seed must be at most 2^63-1"});
  expect_flag_error({"--progress", "yes"}, {"output.progress must be true or false"});
  expect_flag_error({"--schedule=foo"}, {"parallel.schedule must be one of"});
  expect_flag_error({"--layers=a\nb"}, {"got 'a\\nb'"});
  expect_flag_error({"layers", "4"}, {"unexpected argument 'layers'"});
  expect_flag_error({"-layers", "4"}, {"unexpected argument '-layers'"});
}

// loom train reads its own flags and the fields in one pass of the flag parser.
TEST(ConfigFlags, FieldsBesideACommandsOwnFlags) {
  flags::Spec spec{"train", {{"nproc", "4"}, {"config", "x.toml"}}, &flag_source()};
  flags::Parsed p = flags::parse(
      {"--nproc", "4", "--layers", "3", "--config=x.toml", "--lr=0.1", "--seq-len", "8"}, spec);
  Config c;
  for (const auto& item : p.items)
    if (item.from_source) set_flag(c, item.name, item.value, item.spelled);
  EXPECT_EQ(p.get("nproc"), "4");
  EXPECT_EQ(p.get("config"), "x.toml");
  EXPECT_EQ(c.model.layers, 3);
  EXPECT_EQ(c.model.seq_len, 8);
  EXPECT_DOUBLE_EQ(c.train.lr, 0.1);
  // Values are checked when set; an ambiguous name and a stray word never pass.
  expect_usage([&] { set_flag(c, "model.layers", "x", "layers"); }, {"model.layers", "--layers"});
  expect_usage([&] { flags::parse({"--kind", "gpt"}, spec); }, {"ambiguous"});
  expect_usage(
      [&] {
        flags::parse({"--nproc", "2", "extra"}, spec);
      },
      {"unexpected argument 'extra' for loom train"});
  expect_usage(
      [&] {
        flags::parse({"--layer", "2"}, spec);
      },
      {"unknown flag '--layer' for loom train; did you mean '--layers'?"});
}

TEST(ConfigFlags, ShortNamesAreUniqueOrRejected) {
  std::map<std::string, std::vector<std::string>> sections_of;
  for (const auto& f : fields()) sections_of[f.name].push_back(f.section);
  // Only "kind" is shared today (model.kind and data.kind); a new collision must be a
  // conscious choice, so it fails here first.
  for (const auto& [name, sections] : sections_of) {
    if (name == "kind") {
      EXPECT_EQ(sections, (std::vector<std::string>{"model", "data"}));
    } else {
      EXPECT_EQ(sections.size(), 1u) << "short name shared by several sections: " << name;
    }
  }
  expect_flag_error({"--kind", "gpt"},
                    {"flag --kind is ambiguous", "--model.kind", "--data.kind", "long form"});
  expect_flag_error({"--kind=gpt"}, {"ambiguous"});

  // Every unique short flag reaches the same field as its long form.
  for (const auto& f : fields()) {
    if (sections_of[f.name].size() != 1) continue;
    std::string value = f.default_value;
    if (f.type == "string") value = value.substr(1, value.size() - 2);
    if (f.type == "bool") value = value == "true" ? "false" : "true";
    Config a, b;
    apply_overrides(a, {"--" + f.name, value});
    apply_overrides(b, {"--" + f.section + "." + f.name + "=" + value});
    EXPECT_EQ(a, b) << f.name;
  }
}

TEST(Config, RoundTrip) {
  Config c;
  c.model.kind = config::ModelKind::Cnn;
  c.model.vocab = 65536;
  c.model.width = 33;
  c.model.heads = 11;
  c.data.kind = config::DataKind::FashionMnist;
  c.data.path = "dir with \"quotes\", back\\slash, tab\t, newline\n, \xc3\xa9t\xc3\xa9";
  c.data.test_fraction = 1.0 / 3.0;
  c.train.lr = 3e-4;
  c.train.min_lr = 1e-300;
  c.train.eps = 1e-8;
  c.train.momentum = 0.1 + 0.2;  // not exactly 0.3
  c.train.weight_decay = 1;
  c.train.seed = 9223372036854775807ull;
  c.train.steps = 0;
  c.parallel.partition = "1,2,3";
  c.parallel.reshard_after_forward = false;
  c.parallel.bucket_mib = 1e20;
  c.slim.core = 0;
  c.slim.explore = 1;
  c.quant.bits = 4;
  c.emulate.bandwidth = "125MB/s";
  c.emulate.latency = "0.5s";
  c.output.progress = false;
  c.output.resume = "";
  c.output.trace = "t.json";
  ASSERT_NE(c, Config{});
  std::string text = to_toml(c);
  Config back = from_toml_string(text, "round-trip");
  EXPECT_EQ(back, c) << text;
  EXPECT_EQ(to_toml(back), text);
  EXPECT_EQ(from_toml_string(to_toml(Config{})), Config{});
  EXPECT_NE(text.find("[parallel]"), std::string::npos);
  EXPECT_NE(text.find("layers = 4"), std::string::npos);
}

TEST(Units, Bandwidth) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("1Gbit"), 1e9 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("10Gbit"), 10e9 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Mbit"), 100e6 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100 mbit/s"), 100e6 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1Gbps"), 1e9 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1GBPS"), 1e9 / 8);
  EXPECT_DOUBLE_EQ(parse_bandwidth("125MB/s"), 125e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("125mb/s"), 125e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1GiB/s"), 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_bandwidth("2.5kbytes/s"), 2500);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e9"), 1e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth(" 4096 "), 4096);
  EXPECT_DOUBLE_EQ(parse_bandwidth("8bit"), 1);
  for (const char* bad : {"", "fast", "1Gb", "1GB", "1 parsec", "-1Gbit", "0", "0Gbit", "inf",
                          "nan", "Gbit", "1Gbit/s/s", "1e999"}) {
    SCOPED_TRACE(bad);
    expect_usage([&] { parse_bandwidth(bad); }, {"bandwidth", "1Gbit"});
  }
}

TEST(Units, Duration) {
  EXPECT_DOUBLE_EQ(parse_duration("50us"), 50e-6);
  EXPECT_DOUBLE_EQ(parse_duration("50\u00b5s"), 50e-6);
  EXPECT_DOUBLE_EQ(parse_duration("1ms"), 1e-3);
  EXPECT_DOUBLE_EQ(parse_duration("1 MS"), 1e-3);
  EXPECT_DOUBLE_EQ(parse_duration("0.5s"), 0.5);
  EXPECT_DOUBLE_EQ(parse_duration("2ns"), 2e-9);
  EXPECT_DOUBLE_EQ(parse_duration("3"), 3);
  EXPECT_DOUBLE_EQ(parse_duration("0"), 0);
  for (const char* bad : {"", "soon", "-1ms", "1 fortnight", "ms", "1m", "1e999s"}) {
    SCOPED_TRACE(bad);
    expect_usage([&] { parse_duration(bad); }, {"duration", "50us"});
  }
}

TEST(Config, ShippedConfigsLoad) {
  const std::string dir = LOOM_CONFIGS_DIR;
  for (const char* name : {"gpt-fortunes.toml", "cnn-fashion.toml", "mlp-fashion.toml"}) {
    SCOPED_TRACE(name);
    Config c = load_file(dir + "/" + name);
    EXPECT_NO_THROW(validate(c));
  }
  Config gpt = load_file(dir + "/gpt-fortunes.toml");
  EXPECT_EQ(gpt.model.kind, config::ModelKind::Gpt);
  EXPECT_EQ(gpt.model.width, 128);
  EXPECT_EQ(gpt.model.layers, 4);
  EXPECT_EQ(gpt.model.heads, 4);
  EXPECT_EQ(gpt.model.seq_len, 64);
  EXPECT_EQ(gpt.train.global_batch, 32);
  EXPECT_EQ(gpt.train.microbatches, 2);
  EXPECT_EQ(gpt.train.steps, 300);
  EXPECT_EQ(gpt.train.optimizer, config::Optimizer::AdamW);
  EXPECT_DOUBLE_EQ(gpt.train.lr, 1e-3);
  EXPECT_EQ(gpt.train.warmup, 20);
  EXPECT_EQ(gpt.train.eval_every, 50);
  EXPECT_EQ(gpt.data.kind, config::DataKind::Text);
  EXPECT_EQ(gpt.data.path, "/usr/share/games/fortunes");
  EXPECT_EQ(gpt.output.dir, "runs/demo");

  Config cnn = load_file(dir + "/cnn-fashion.toml");
  EXPECT_EQ(cnn.model.kind, config::ModelKind::Cnn);
  EXPECT_EQ(cnn.data.kind, config::DataKind::FashionMnist);
  EXPECT_EQ(cnn.train.optimizer, config::Optimizer::Sgd);
  EXPECT_DOUBLE_EQ(cnn.train.lr, 0.05);
  EXPECT_DOUBLE_EQ(cnn.train.momentum, 0.9);
  EXPECT_EQ(cnn.train.global_batch, 64);
  EXPECT_EQ(cnn.train.steps, 1000);

  Config mlp = load_file(dir + "/mlp-fashion.toml");
  EXPECT_EQ(mlp.model.kind, config::ModelKind::Mlp);
  EXPECT_EQ(mlp.data.kind, config::DataKind::FashionMnist);
}

// The issue's spellings: --dp-mode, --slim-core, --emulate-bandwidth (hyphens for "_" or ".").
TEST(ConfigFlags, HyphenatedSpellings) {
  Config c;
  apply_overrides(c, {"--dp-mode",
                      "slim",
                      "--slim-core",
                      "0.3",
                      "--slim-explore=0.05",
                      "--slim-period",
                      "2",
                      "--slim-refresh",
                      "5",
                      "--slim-lambda",
                      "0.5",
                      "--slim-full-sync",
                      "4",
                      "--emulate-bandwidth",
                      "1Gbit",
                      "--emulate-latency",
                      "50us",
                      "--quant-bits",
                      "4",
                      "--global-batch",
                      "32",
                      "--slim.full-sync",
                      "3"});
  // Those fields and no other (the last --slim.full-sync wins).
  Config want;
  want.parallel.dp_mode = DpMode::Slim;
  want.slim = {
      .core = 0.3, .explore = 0.05, .period = 2, .refresh = 5, .lambda = 0.5, .full_sync = 3};
  want.emulate = {.bandwidth = "1Gbit", .latency = "50us"};
  want.quant.bits = 4;
  want.train.global_batch = 32;
  EXPECT_EQ(c, want) << to_toml(c);
  expect_flag_error({"--slim-core", "1.5"}, {"slim.core must be in [0, 1], got 1.5"});
  expect_flag_error({"--slim-cores", "0.5"}, {"unknown flag"});
}

// Every enumerator has one spelling, and the spelling reads back to it; the schema, --help and
// to_toml show those spellings.
template <Choice E>
void expect_round_trip() {
  for (size_t i = 0; i < Names<E>::list.size(); ++i) {
    const E e = static_cast<E>(i);
    EXPECT_EQ(parse_choice<E>(name_of(e)), e) << name_of(e);
  }
  EXPECT_FALSE(parse_choice<E>("").has_value());
  EXPECT_FALSE(parse_choice<E>("nope").has_value());
}

TEST(ConfigEnums, SpellingsRoundTrip) {
  expect_round_trip<ModelKind>();
  expect_round_trip<DataKind>();
  expect_round_trip<Optimizer>();
  expect_round_trip<LrSchedule>();
  expect_round_trip<DpMode>();
  expect_round_trip<CommChoice>();
  expect_round_trip<NanPolicy>();
  EXPECT_EQ(name_of(DataKind::FashionMnist), "fashion-mnist");
  EXPECT_EQ(zero_level(DpMode::Zero2), 2);
  EXPECT_EQ(zero_level(DpMode::Slim), 0);
  Config c;
  apply_overrides(c, {"--comm", "gloo", "--data.kind", "fashion-mnist", "--model.kind", "cnn"});
  EXPECT_EQ(c.parallel.comm, CommChoice::Gloo);
  EXPECT_EQ(c.data.kind, DataKind::FashionMnist);
  const std::string toml = to_toml(c);
  EXPECT_NE(toml.find("comm = \"gloo\"  # communication backend"), std::string::npos) << toml;
  EXPECT_NE(toml.find("one of auto|mpi|gloo|nccl"), std::string::npos) << toml;
  EXPECT_EQ(from_toml_string(toml), c);
  expect_flag_error(
      {"--comm", "tcp"},
      {"parallel.comm must be one of auto|mpi|gloo|nccl, got 'tcp' (from flag --comm)"});
  std::ostringstream os;
  os << DpMode::Zero3;
  EXPECT_EQ(os.str(), "zero3");
}

}  // namespace
}  // namespace loom::config

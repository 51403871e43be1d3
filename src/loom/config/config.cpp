// The configuration schema and everything driven by it. Each field is described once, in
// schema() below; TOML loading, flag overrides, --help (fields()), validate() and to_toml()
// all walk that one table, so adding a field means adding one line there.
#include "loom/config/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>
#include <variant>

#include "loom/common/error.h"
#include "loom/config/text.h"
#include "loom/config/toml_parse.h"
#include "loom/flags/flags.h"

namespace loom::config {
namespace {

using text::quote;

// Where a field lives inside a Config. Its alternative is also the field's type, so the type
// is never written down separately.
// An enum field (config.h's Choice) is reached through its value's index in Names<E>::list.
struct EnumRef {
  void* p;
  const std::string_view* names;
  size_t count;
  size_t (*get)(const void*);
  void (*set)(void*, size_t);

  std::string value() const { return std::string(names[get(p)]); }
  std::string choices() const {
    std::string out;
    for (size_t i = 0; i < count; ++i) {
      if (i) out += '|';
      out += names[i];
    }
    return out;
  }
  bool assign(std::string_view text) const {
    for (size_t i = 0; i < count; ++i)
      if (names[i] == text) return set(p, i), true;
    return false;
  }
};
using Ref = std::variant<int64_t*, uint64_t*, double*, std::string*, bool*, EnumRef>;

template <typename T>
Ref to_ref(T* p) {
  if constexpr (Choice<T>) {
    return EnumRef{p, Names<T>::list.data(), Names<T>::list.size(),
                   [](const void* q) { return static_cast<size_t>(*static_cast<const T*>(q)); },
                   [](void* q, size_t i) { *static_cast<T*>(q) = static_cast<T>(i); }};
  } else {
    return p;
  }
}

template <typename... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <typename... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

// A field's own constraint. `text` goes into the help line; `check` returns "" for a good
// value and otherwise what the value must be ("must be >= 1").
struct Rule {
  std::string text;
  std::function<std::string(const Ref&)> check;
};

struct Field {
  std::string section;
  std::string name;
  Ref (*get)(Config&);
  std::string help;
  Rule rule;

  std::string key() const { return section + "." + name; }
};

// Shortest text that reads back to the same double (std::to_chars guarantees the round
// trip, which to_toml relies on). Plain decimals unless the exponent form is much shorter,
// so that 3e-4 shows as 0.0003 but 1e-8 stays 1e-8.
std::string number_text(double v) {
  char fixed[400], sci[64];
  auto f = std::to_chars(fixed, fixed + sizeof fixed, v, std::chars_format::fixed);
  auto e = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
  if (f.ec == std::errc() && f.ptr - fixed <= e.ptr - sci + 3) return std::string(fixed, f.ptr);
  // "1e-08" -> "1e-8", "1e+20" -> "1e20": both forms are valid TOML, the short one reads better.
  std::string s(sci, e.ptr);
  size_t at = s.find('e');
  if (at == std::string::npos) return s;  // inf, nan
  std::string mantissa = s.substr(0, at), exponent = s.substr(at + 1);
  std::string sign;
  if (exponent[0] == '+' || exponent[0] == '-') {
    if (exponent[0] == '-') sign = "-";
    exponent.erase(0, 1);
  }
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return mantissa + "e" + sign + exponent;
}

// A TOML float literal: "1" would read back as an integer, so it becomes "1.0".
std::string toml_double(double v) {
  std::string s = number_text(v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n': inf and nan
  return s;
}

// The value as it is written in TOML: strings quoted and escaped, floats with a point.
std::string toml_value(const Ref& r) {
  return std::visit(Overloaded{
                        [](const int64_t* p) { return std::to_string(*p); },
                        [](const uint64_t* p) { return std::to_string(*p); },
                        [](const double* p) { return toml_double(*p); },
                        [](const std::string* p) { return detail::toml_string(*p); },
                        [](const bool* p) { return std::string(*p ? "true" : "false"); },
                        [](const EnumRef& e) { return detail::toml_string(e.value()); },
                    },
                    r);
}

// The value as shown after "got" in an error message.
std::string display(const Ref& r) {
  if (auto p = std::get_if<std::string*>(&r)) return quote(**p);
  if (auto p = std::get_if<EnumRef>(&r)) return quote(p->value());
  if (auto p = std::get_if<double*>(&r)) return number_text(**p);
  return toml_value(r);
}

// What a value of this type looks like, for "must be ..." in type errors.
std::string expected(const Ref& r) {
  return std::visit(Overloaded{
                        [](const int64_t*) { return std::string("an integer"); },
                        [](const uint64_t*) { return std::string("a non-negative integer"); },
                        [](const double*) { return std::string("a number"); },
                        [](const std::string*) { return std::string("a string"); },
                        [](const bool*) { return std::string("true or false"); },
                        [](const EnumRef& e) { return "one of " + e.choices(); },
                    },
                    r);
}

std::string type_name(const Ref& r) {
  return std::visit(Overloaded{
                        [](const int64_t*) { return "int"; },
                        [](const uint64_t*) { return "int"; },
                        [](const double*) { return "float"; },
                        [](const std::string*) { return "string"; },
                        [](const bool*) { return "bool"; },
                        [](const EnumRef&) { return "string"; },
                    },
                    r);
}

// ---- rules ----------------------------------------------------------------------------------

// Without an upper bound a count still fits the int that the runtime keeps it in.
constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

Rule int_range(int64_t lo, int64_t hi = kIntMax) {
  const std::string text =
      hi == kIntMax ? ">= " + std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
  return {text, [=](const Ref& r) -> std::string {
            int64_t v = *std::get<int64_t*>(r);
            if (v >= lo && v <= hi) return "";
            if (hi == kIntMax)
              return v < lo ? "must be " + text : "must be at most " + std::to_string(hi);
            return "must be in " + text;
          }};
}

// Seeds are uint64 but TOML integers are signed 64-bit, so the top half could not be
// written back by to_toml.
Rule seed_range() {
  const auto hi = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  return {"0..2^63-1", [=](const Ref& r) -> std::string {
            return *std::get<uint64_t*>(r) > hi ? "must be at most 2^63-1 = " + std::to_string(hi)
                                                : "";
          }};
}

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

// lo and hi are bounds; *_open excludes them. hi = kNoLimit means no upper bound.
Rule float_range(double lo, bool lo_open, double hi = kNoLimit, bool hi_open = true) {
  std::string text;
  if (hi == kNoLimit) {
    text = (lo_open ? "> " : ">= ") + number_text(lo);
  } else {
    text = std::string("in ") + (lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) +
           (hi_open ? ")" : "]");
  }
  return {text, [=](const Ref& r) -> std::string {
            double v = *std::get<double*>(r);
            bool ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
            return ok ? "" : "must be " + text;
          }};
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

Rule one_of(const std::vector<std::string>& choices) {
  std::string text = "one of " + join(choices, "|");
  return {text, [=](const Ref& r) -> std::string {
            const std::string& v = *std::get<std::string*>(r);
            for (const auto& c : choices) {
              if (v == c) return "";
            }
            return "must be " + text;
          }};
}

Rule int_one_of(const std::vector<int64_t>& choices) {
  std::vector<std::string> names;
  for (int64_t c : choices) names.push_back(std::to_string(c));
  std::string text = "one of " + join(names, "|");
  return {text, [=](const Ref& r) -> std::string {
            for (int64_t c : choices) {
              if (*std::get<int64_t*>(r) == c) return "";
            }
            return "must be " + text;
          }};
}

// A string rule from a predicate; `must` completes "must be ...".
Rule string_rule(std::string text, const std::string& must,
                 const std::function<bool(const std::string&)>& ok) {
  return {std::move(text), [=](const Ref& r) -> std::string {
            return ok(*std::get<std::string*>(r)) ? "" : "must be " + must;
          }};
}

// "flops", "uniform" or strictly increasing non-negative block indices such as "2,5,9".
bool valid_partition(const std::string& s) {
  if (s == "flops" || s == "uniform") return true;
  if (s.empty()) return false;
  int64_t previous = -1;
  std::stringstream in(s);
  std::string item;
  size_t items = 0;
  while (std::getline(in, item, ',')) {
    ++items;
    size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    if (a == std::string::npos) return false;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(item.data() + a, item.data() + b + 1, v);
    if (ec != std::errc() || end != item.data() + b + 1 || v <= previous) return false;
    previous = v;
  }
  // getline drops a trailing empty item ("2,5,"), so count the commas as well.
  return items == static_cast<size_t>(std::count(s.begin(), s.end(), ',')) + 1;
}

template <double (*parse)(const std::string&)>
bool parses_or_empty(const std::string& s) {
  if (s.empty()) return true;
  try {
    parse(s);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

// ---- the schema -----------------------------------------------------------------------------

// Section, name and accessor from one spelling, so the three cannot drift apart.
#define LOOM_FIELD(section, member) \
#section, #member, [](Config & c) -> Ref { return to_ref(&c.section.member); }

const std::vector<Field>& schema() {
  static const std::vector<Field> table = {
      {LOOM_FIELD(model, kind), "model family", {}},
      {LOOM_FIELD(model, vocab), "vocabulary size (gpt; 256 = bytes)", int_range(2, 65536)},
      {LOOM_FIELD(model, seq_len), "context length T (gpt)", int_range(1, kMaxSeqLen)},
      {LOOM_FIELD(model, width), "model width D (gpt) or hidden units (mlp)",
       int_range(1, kMaxWidth)},
      {LOOM_FIELD(model, layers), "transformer blocks (gpt) or hidden layers (mlp)",
       int_range(1, kMaxLayers)},
      {LOOM_FIELD(model, heads), "attention heads (gpt); must divide width",
       int_range(1, kMaxWidth)},
      {LOOM_FIELD(model, classes), "output classes (mlp, cnn)", int_range(2)},
      {LOOM_FIELD(model, attention),
       "attention core (gpt): standard (softmax(q k^T) v, the t x t scores kept) or flash "
       "(one fused kernel, scaled_dot_product_attention: no t x t scores kept)",
       {}},
      {LOOM_FIELD(model, kv_heads),
       "key/value heads of grouped-query attention (llama); divides heads; 0 = heads",
       int_range(0, kMaxWidth)},
      {LOOM_FIELD(model, ffn_width),
       "SwiGLU hidden units (llama); 0 = the smallest multiple of 64 >= 8 * width / 3",
       int_range(0, kMaxWidth)},
      {LOOM_FIELD(model, tie_embeddings),
       "the output head is the token embedding (gpt, llama; on a pipeline the last stage "
       "multiplies by a copy of it)",
       {}},
      {LOOM_FIELD(model, head_bias),
       "the GPT's output head adds a bias; GPT-2's has none, so only a GPT without one exports "
       "to Hugging Face",
       {}},
      {LOOM_FIELD(model, rope_theta), "base of the rotary position embedding (llama)",
       float_range(0, true)},

      {LOOM_FIELD(data, kind), "data set", {}},
      {LOOM_FIELD(data, path), "text: file or folder; fashion-mnist: folder; empty = default", {}},
      {LOOM_FIELD(data, tokenizer),
       "text: SentencePiece model file (loom tokenizer train); empty = bytes (256 tokens)",
       {}},
      {LOOM_FIELD(data, synthetic_size),
       "samples in the synthetic data set (the sampler keeps 8 bytes a sample per rank)",
       int_range(1, int64_t{1} << 26)},
      {LOOM_FIELD(data, test_fraction), "held-out tail of the text", float_range(0, true, 1)},

      {LOOM_FIELD(train, steps), "optimizer steps", int_range(0)},
      {LOOM_FIELD(train, global_batch), "samples per step over all replicas", int_range(1)},
      {LOOM_FIELD(train, microbatches), "micro-batches per replica per step",
       int_range(1, kMaxMicrobatches)},
      {LOOM_FIELD(train, optimizer), "optimizer", {}},
      {LOOM_FIELD(train, lr), "peak learning rate", float_range(0, true)},
      {LOOM_FIELD(train, min_lr), "final learning rate of the cosine schedule",
       float_range(0, false)},
      {LOOM_FIELD(train, warmup), "steps of linear warm-up", int_range(0)},
      {LOOM_FIELD(train, lr_schedule), "learning-rate schedule", {}},
      {LOOM_FIELD(train, momentum), "sgd momentum", float_range(0, false, 1)},
      {LOOM_FIELD(train, weight_decay), "decoupled weight decay", float_range(0, false)},
      {LOOM_FIELD(train, beta1), "adamw beta1", float_range(0, false, 1)},
      {LOOM_FIELD(train, beta2), "adamw beta2", float_range(0, false, 1)},
      {LOOM_FIELD(train, eps), "adamw epsilon", float_range(0, true)},
      {LOOM_FIELD(train, clip), "global gradient-norm clipping; 0 = off", float_range(0, false)},
      {LOOM_FIELD(train, eval_every), "steps between evaluations; 0 = only at the end",
       int_range(0)},
      {LOOM_FIELD(train, eval_batches), "batches of global_batch samples per evaluation",
       int_range(1)},
      {LOOM_FIELD(train, final_eval),
       "evaluate the whole test split after the last step; false: only eval_every's evaluations",
       {}},
      {LOOM_FIELD(train, seed), "random seed", seed_range()},
      {LOOM_FIELD(train, threads), "compute threads per rank", int_range(1, 1024)},
      {LOOM_FIELD(train, on_nan),
       "a step whose loss or gradient norm is not finite: stop "
       "(exit 1 naming the step, before its update) or skip (no update for that step)",
       {}},
      {LOOM_FIELD(train, device),
       "where each rank computes: cpu, or cuda (GPU LOCAL_RANK mod the GPUs visible)",
       {}},
      {LOOM_FIELD(train, precision),
       "fp32, or bf16 compute (autocast) with fp32 master weights, gradients and optimizer "
       "state",
       {}},
      {LOOM_FIELD(train, cpu_gemm),
       "float32 matrix products on the CPU: auto (onednn where the CPU has AVX-512, else blas), "
       "blas (libtorch's: MKL in the x86 wheel) or onednn (faster than MKL on AMD processors)",
       {}},

      {LOOM_FIELD(parallel, dp), "data-parallel replicas; 0 = world / (pp x tp)",
       int_range(0, kMaxRanks)},
      {LOOM_FIELD(parallel, pp), "pipeline ranks (stages = pp x loops)", int_range(1, kMaxRanks)},
      {LOOM_FIELD(parallel, tp),
       "tensor-parallel ranks per stage (gpt: attention heads, MLP, vocabulary split; divides "
       "heads and vocab)",
       int_range(1, kMaxRanks)},
      {LOOM_FIELD(parallel, sequence_parallel),
       "with tp > 1: LayerNorms and residuals on a part of the sequence, all-gather and "
       "reduce-scatter instead of all-reduce, pipeline messages of b*s*h/tp",
       {}},
      {LOOM_FIELD(parallel, loops),
       "stages per pipeline rank (interleaved, bfs, gpipe; 2 for zbv, dualpipev)",
       int_range(1, kMaxRanks)},
      {LOOM_FIELD(parallel, schedule), "pipeline schedule",
       one_of({"gpipe", "1f1b", "interleaved", "bfs", "zb-h1", "zbv", "dualpipev"})},
      {LOOM_FIELD(parallel, schedule_file),
       "custom CSV schedule, overrides schedule; empty = none",
       {}},
      {LOOM_FIELD(parallel, partition), "how blocks are cut into stages",
       string_rule("flops|uniform|increasing block indices like 2,5,9",
                   "flops|uniform or comma-separated increasing non-negative block indices "
                   "like 2,5,9",
                   valid_partition)},
      {LOOM_FIELD(parallel, dp_mode), "data-parallel gradient exchange", {}},
      {LOOM_FIELD(parallel, comm),
       "communication backend; auto = mpi under mpirun or "
       "--nproc, gloo under torchrun",
       {}},
      {LOOM_FIELD(parallel, bucket_mib), "gradient bucket size in MiB", float_range(0, true)},
      {LOOM_FIELD(parallel, reshard_after_forward),
       "zero3: free gathered parameters after "
       "forward",
       {}},
      {LOOM_FIELD(parallel, max_unsharded),
       "zero3: stages gathered at once per rank (prefetch bound)", int_range(1, kMaxLayers)},
      {LOOM_FIELD(parallel, recompute),
       "activation recomputation (gpt): none, selective (the attention core is recomputed in "
       "the backward) or full (each layer keeps only its input and runs again in the backward)",
       {}},
      {LOOM_FIELD(parallel, grad_reduce),
       "type the data-parallel gradient reduction travels in (allreduce, zero1-3): fp32, or "
       "bf16 (half the bytes, rounded sums)",
       {}},
      {LOOM_FIELD(parallel, placement),
       "how ranks are numbered across machines: dp-inside (a dp group on consecutive ranks, "
       "pipeline stages across machines) or pipeline-inside (a pipeline on consecutive ranks, "
       "dp groups across machines); tensor-parallel groups are innermost either way",
       {}},

      {LOOM_FIELD(slim, core),
       "c: fraction of coordinates in the core set (core + explore "
       "in (0, 1])",
       float_range(0, false, 1, false)},
      {LOOM_FIELD(slim, explore), "e: fraction of coordinates in the explorer set",
       float_range(0, false, 1, false)},
      {LOOM_FIELD(slim, period), "tau: steps between syncs", int_range(1)},
      {LOOM_FIELD(slim, refresh), "R: syncs between core-set refreshes", int_range(1)},
      {LOOM_FIELD(slim, lambda), "significance weight of the running update",
       float_range(0, false)},
      {LOOM_FIELD(slim, full_sync), "F: full sync every F syncs; 0 = never", int_range(0)},

      {LOOM_FIELD(quant, bits), "bits per quantized value (2: ternary codes -1, 0, 1)",
       int_one_of({2, 3, 4, 8})},
      {LOOM_FIELD(quant, block), "values per scale", int_range(1)},
      {LOOM_FIELD(quant, gather_bits),
       "bits of the second phase, the all-gathered mean (not error-fed); 0 = quant.bits",
       int_one_of({0, 2, 3, 4, 8})},
      {LOOM_FIELD(quant, rms_clip),
       "error-fed shards: scale each block to rms_clip x its RMS, not its largest value (what "
       "is clipped is fed back); 0 = the largest value",
       float_range(0, false)},
      {LOOM_FIELD(quant, entropy),
       "send the codes of both phases entropy-coded (zstd): fewer bytes, the same result",
       {}},

      {LOOM_FIELD(diloco, inner_steps), "H: local steps of train.optimizer between outer steps",
       int_range(1)},
      {LOOM_FIELD(diloco, outer_lr), "the outer step's learning rate", float_range(0, true)},
      {LOOM_FIELD(diloco, outer_momentum), "the outer step's momentum; 0 = plain SGD",
       float_range(0, false, 1, false)},
      {LOOM_FIELD(diloco, nesterov), "Nesterov momentum in the outer step", {}},
      {LOOM_FIELD(diloco, fragments),
       "streaming-diloco: parameter fragments meeting on staggered steps", int_range(1)},
      {LOOM_FIELD(diloco, outer_bits), "streaming-diloco: bits per outer-gradient value",
       int_one_of({32, 8, 4, 2})},
      {LOOM_FIELD(diloco, overlap),
       "streaming-diloco: inner steps the outer exchange overlaps; 0 = none", int_range(0)},
      {LOOM_FIELD(diloco, mix),
       "streaming-diloco with overlap: weight of the replica's own parameters on merging",
       float_range(0, false, 1, true)},

      {LOOM_FIELD(powersgd, rank), "r: columns of the low-rank factors", int_range(1)},
      {LOOM_FIELD(powersgd, warm_start), "start each step's Q from the previous step's", {}},
      {LOOM_FIELD(powersgd, start_step), "steps of plain all-reduce before compressing",
       int_range(0)},

      {LOOM_FIELD(emulate, bandwidth), "emulated link bandwidth; empty = off",
       string_rule("e.g. 1Gbit, 100Mbit, 125MB/s",
                   "empty or a bandwidth such as 1Gbit, 100Mbit, 1Gbps or 125MB/s",
                   parses_or_empty<parse_bandwidth>)},
      {LOOM_FIELD(emulate, latency), "emulated link latency; empty = off",
       string_rule("e.g. 50us, 1ms", "empty or a duration such as 50us, 1ms or 0.5s",
                   parses_or_empty<parse_duration>)},

      {LOOM_FIELD(output, dir), "run folder for metrics, config and checkpoints",
       string_rule("non-empty", "a non-empty path",
                   [](const std::string& s) { return !s.empty(); })},
      {LOOM_FIELD(output, checkpoint_every), "steps between checkpoints; 0 = only at the end",
       int_range(0)},
      {LOOM_FIELD(output, keep), "complete checkpoints kept, the newest ones", int_range(1)},
      {LOOM_FIELD(output, host_copies),
       "on hosts whose run folders are their own (node-local disks): how many other hosts, the "
       "next ones, also keep each rank's checkpoint file (a checkpoint survives the loss of that "
       "many hosts with their disks)",
       int_range(1)},
      {LOOM_FIELD(output, async_save),
       "write a checkpoint's files in the background while the next steps train, and on hosts "
       "without a shared folder their copies to other hosts (the state is copied first: the "
       "rank holds a second copy of it meanwhile, which `loom simulate --from-config` "
       "counts); the checkpoint is complete (its manifest "
       "written) after the first step that ends with every rank's file written and copied, at "
       "the latest when the next checkpoint begins; the last step's is written at once",
       {}},
      {LOOM_FIELD(output, overwrite),
       "start a new run in a folder that holds another run, "
       "deleting its metrics and checkpoints",
       {}},
      {LOOM_FIELD(output, progress), "progress bar when stderr is a terminal", {}},
      {LOOM_FIELD(output, resume),
       "checkpoint to resume from: a run's folder, its checkpoint folder or a step folder; empty = "
       "fresh start",
       {}},
      {LOOM_FIELD(output, trace), "Chrome trace JSON of the measured timeline; empty = none", {}},
      {LOOM_FIELD(output, memory_report),
       "write memory-rankN.txt in the run folder: the allocations live at each rank's memory "
       "peak over the training steps, grouped by the operators that made them",
       {}},
      {LOOM_FIELD(output, calibrate_every),
       "steps between speed calibrations (each rank in turn "
       "times a transformer layer alone, then all at once, outside the step time, into "
       "metrics.jsonl; gpt and llama); 0 = off",
       int_range(0)},
      {LOOM_FIELD(output, sample_every),
       "steps between text samples printed by rank 0 (gpt, llama); 0 = off", int_range(0)},
  };
  return table;
}

#undef LOOM_FIELD

// The schema only reads through this; the const_cast saves a second, const accessor.
Ref ref(const Config& c, const Field& f) {
  return f.get(const_cast<Config&>(c));
}

const Config& defaults() {
  static const Config c;
  return c;
}

std::vector<std::string> section_names() {
  std::vector<std::string> out;
  for (const auto& f : schema()) {
    if (out.empty() || out.back() != f.section) out.push_back(f.section);
  }
  return out;
}

const Field* find_field(const std::string& section, const std::string& name) {
  for (const auto& f : schema()) {
    if (f.section == section && f.name == name) return &f;
  }
  return nullptr;
}

std::vector<const Field*> find_short(const std::string& name) {
  std::vector<const Field*> out;
  for (const auto& f : schema()) {
    if (f.name == name) out.push_back(&f);
  }
  return out;
}

const Field* find_field_by_key(const std::string& key) {
  auto dot = key.find('.');
  return dot == std::string::npos ? nullptr : find_field(key.substr(0, dot), key.substr(dot + 1));
}

bool has_section(const std::string& section) {
  for (const auto& f : schema()) {
    if (f.section == section) return true;
  }
  return false;
}

std::vector<std::string> long_names() {
  std::vector<std::string> out;
  for (const auto& f : schema()) out.push_back(f.key());
  return out;
}

std::vector<std::string> keys_of(const std::vector<const Field*>& fs) {
  std::vector<std::string> out;
  for (const Field* f : fs) out.push_back(f->key());
  return out;
}

// Long names that `section.name` may have meant; empty when nothing is close. A known name in
// the wrong section ("model.lr") is better fixed by its section than by the nearest spelling.
std::vector<std::string> suggest_field(const std::string& section, const std::string& name) {
  if (has_section(section)) {
    std::vector<std::string> same_section;
    for (const auto& f : schema()) {
      if (f.section == section) same_section.push_back(f.name);
    }
    std::string near = text::closest(name, same_section);
    if (!near.empty()) return {section + "." + near};
  }
  if (auto elsewhere = find_short(name); !elsewhere.empty()) return keys_of(elsewhere);
  std::string near = text::closest(section + "." + name, long_names());
  if (!near.empty()) return {near};
  return {};
}

// Long names that a top-level `name` (no section) may have meant.
std::vector<std::string> suggest_short(const std::string& name) {
  std::vector<std::string> shorts;
  for (const auto& f : schema()) shorts.push_back(f.name);
  std::string near = text::closest(name, shorts);
  return near.empty() ? std::vector<std::string>{} : keys_of(find_short(near));
}

// "; " and the field's allowed values, for help lines and to_toml.
std::string rule_text(const Field& f) {
  const Ref r = ref(defaults(), f);
  if (auto e = std::get_if<EnumRef>(&r)) return "; one of " + e->choices();
  return f.rule.text.empty() ? "" : "; " + f.rule.text;
}

void check_rule(const Config& c, const Field& f, const std::string& where) {
  if (!f.rule.check) return;
  Ref r = ref(c, f);
  std::string must = f.rule.check(r);
  if (!must.empty()) LOOM_USAGE(f.key(), " ", must, ", got ", display(r), where);
}

// ---- TOML -----------------------------------------------------------------------------------

std::string describe(const toml::node& node) {
  if (auto v = node.as_string()) return quote(v->get(), '"');
  if (auto v = node.as_integer()) return std::to_string(v->get());
  if (auto v = node.as_floating_point()) return toml_double(v->get());
  if (auto v = node.as_boolean()) return v->get() ? "true" : "false";
  if (node.is_array()) return "an array";
  if (node.is_table()) return "a table";
  return "a date/time";
}

std::string location(const std::string& origin, const toml::node& node) {
  const auto& begin = node.source().begin;
  if (begin.line == 0) return " (in " + origin + ")";
  return " (in " + origin + ", line " + std::to_string(begin.line) + ")";
}

void set_from_node(Config& c, const Field& f, const toml::node& node, const std::string& where) {
  Ref r = f.get(c);
  bool ok = std::visit(Overloaded{
                           [&](int64_t* p) {
                             auto v = node.as_integer();
                             if (v) *p = v->get();
                             return v != nullptr;
                           },
                           [&](uint64_t* p) {
                             auto v = node.as_integer();
                             if (!v || v->get() < 0) return false;
                             *p = static_cast<uint64_t>(v->get());
                             return true;
                           },
                           [&](double* p) {
                             // Integers are fine where a float is expected: "lr = 1" means 1.0.
                             if (auto v = node.as_integer()) {
                               *p = static_cast<double>(v->get());
                               return true;
                             }
                             auto v = node.as_floating_point();
                             if (!v || !std::isfinite(v->get())) return false;
                             *p = v->get();
                             return true;
                           },
                           [&](std::string* p) {
                             auto v = node.as_string();
                             if (v) *p = v->get();
                             return v != nullptr;
                           },
                           [&](bool* p) {
                             auto v = node.as_boolean();
                             if (v) *p = v->get();
                             return v != nullptr;
                           },
                           [&](const EnumRef& e) {
                             auto v = node.as_string();
                             return v && e.assign(v->get());
                           },
                       },
                       r);
  // An unknown name reads like any other bad value: 'name', as check_rule() shows it.
  const auto* text = node.as_string();
  if (!ok && text && std::holds_alternative<EnumRef>(r))
    LOOM_USAGE(f.key(), " must be ", expected(r), ", got ", quote(text->get()), where);
  if (!ok) LOOM_USAGE(f.key(), " must be ", expected(r), ", got ", describe(node), where);
  check_rule(c, f, where);
}

// ---- flags ----------------------------------------------------------------------------------

void set_from_text(Config& c, const Field& f, const std::string& text, const std::string& where) {
  Ref r = f.get(c);
  const char* first = text.data();
  const char* last = text.data() + text.size();
  bool ok = std::visit(Overloaded{
                           [&](int64_t* p) {
                             auto [end, ec] = std::from_chars(first, last, *p);
                             return ec == std::errc() && end == last && !text.empty();
                           },
                           [&](uint64_t* p) {
                             auto [end, ec] = std::from_chars(first, last, *p);
                             return ec == std::errc() && end == last && !text.empty();
                           },
                           [&](double* p) {
                             double v = 0;
                             auto [end, ec] = std::from_chars(first, last, v);
                             if (ec != std::errc() || end != last || !std::isfinite(v)) {
                               return false;
                             }
                             *p = v;
                             return true;
                           },
                           [&](std::string* p) {
                             *p = text;
                             return true;
                           },
                           [&](bool* p) {
                             if (text != "true" && text != "false") return false;
                             *p = text == "true";
                             return true;
                           },
                           [&](const EnumRef& e) { return e.assign(text); },
                       },
                       r);
  if (!ok) LOOM_USAGE(f.key(), " must be ", expected(r), ", got ", quote(text), where);
  check_rule(c, f, where);
}

// The field a flag names (as typed, without "--"), or nullptr; an ambiguous short name is an
// error. Hyphenated spellings (--dp-mode, --slim-core, --emulate-bandwidth) name the same
// fields: "-" reads as "_", and the first "-" after a section name may also read as ".".
const Field* resolve_flag(const std::string& name) {
  if (name.find('-') != std::string::npos) {
    std::string under = name;
    std::replace(under.begin(), under.end(), '-', '_');
    auto dash = name.find('-');
    if (name.find('.') == std::string::npos)
      if (const Field* f = find_field(name.substr(0, dash), under.substr(dash + 1))) return f;
    return resolve_flag(under);
  }
  auto dot = name.find('.');
  if (dot != std::string::npos) return find_field(name.substr(0, dot), name.substr(dot + 1));
  auto matches = find_short(name);
  if (matches.size() > 1) {
    std::vector<std::string> forms;
    for (const Field* f : matches) forms.push_back("--" + f->key());
    LOOM_USAGE("flag --", name, " is ambiguous: it names ", join(forms, " and "),
               "; use the long form, e.g. ", forms[0]);
  }
  return matches.empty() ? nullptr : matches[0];
}

// Flags that an unknown flag `name` may have meant, without "--".
std::vector<std::string> suggest_flag(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  auto dot = name.find('.');
  if (dot != std::string::npos) return suggest_field(name.substr(0, dot), name.substr(dot + 1));
  std::vector<std::string> guess = suggest_short(name);
  // A unique short name is the shorter flag; a shared one needs the long forms.
  if (guess.size() == 1) guess[0] = find_field_by_key(guess[0])->name;
  return guess;
}

// A plausible value for the "needs a value" hint.
std::string example_value(const Field& f) {
  Ref r = ref(defaults(), f);
  if (std::holds_alternative<bool*>(r)) return "true|false";
  if (auto p = std::get_if<EnumRef>(&r)) return p->value();
  if (auto p = std::get_if<std::string*>(&r)) return (*p)->empty() ? "<text>" : **p;
  return display(r);
}

}  // namespace

const std::vector<FieldInfo>& fields() {
  static const std::vector<FieldInfo> infos = [] {
    std::vector<FieldInfo> out;
    for (const auto& f : schema()) {
      Ref r = ref(defaults(), f);
      std::string help = f.help + rule_text(f);
      out.push_back({f.section, f.name, type_name(r), help, toml_value(r)});
    }
    return out;
  }();
  return infos;
}

Config load_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    LOOM_USAGE("config file ", quote(path), " not found; pass an existing file to --config");
  }
  if (std::filesystem::is_directory(path, ec)) {
    LOOM_USAGE("config file ", quote(path), " is a directory; pass a .toml file to --config");
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    LOOM_USAGE("config file ", quote(path), " cannot be read; check its permissions");
  }
  return from_toml_string(text.str(), path);
}

Config from_toml_string(const std::string& text, const std::string& origin) {
  const toml::table root = parse_toml(text, origin);
  Config c;
  for (const auto& [key, node] : root) {
    const std::string section(key.str());
    if (!has_section(section)) {
      if (!node.is_table()) {
        // "layers = 4" above every [section]: the section header is missing.
        std::string what =
            "unknown field " + quote(section) + " in " + origin + "; fields belong in a section";
        auto guess = suggest_short(section);
        if (guess.empty()) LOOM_USAGE(what, " such as [model]");
        LOOM_USAGE(what, ", did you mean ", text::alternatives(guess), "?");
      }
      std::string what = "unknown section [" + text::escape(section) + "] in " + origin;
      std::string guess = text::closest(section, section_names());
      if (!guess.empty()) LOOM_USAGE(what, "; did you mean [", guess, "]?");
      LOOM_USAGE(what, "; the sections are ", join(section_names(), ", "));
    }
    const toml::table* table = node.as_table();
    if (!table) {
      LOOM_USAGE(section, " must be a section [", section, "], got ", describe(node),
                 location(origin, node));
    }
    for (const auto& [name_key, value] : *table) {
      const std::string name(name_key.str());
      const Field* f = find_field(section, name);
      if (!f) {
        auto guess = suggest_field(section, name);
        std::string what = "unknown field " + quote(section + "." + name) + " in " + origin;
        if (guess.empty()) {
          std::vector<std::string> names;
          for (const auto& g : schema()) {
            if (g.section == section) names.push_back(g.name);
          }
          LOOM_USAGE(what, "; the fields of [", section, "] are ", join(names, ", "));
        }
        LOOM_USAGE(what, "; did you mean ", text::alternatives(guess), "?");
      }
      set_from_node(c, *f, value, location(origin, value));
    }
  }
  return c;
}

const flags::Source& flag_source() {
  static const flags::Source source{
      [](const std::string& name) -> std::optional<flags::Flag> {
        const Field* f = resolve_flag(name);
        if (!f) return std::nullopt;
        const bool boolean = std::holds_alternative<bool*>(ref(defaults(), *f));
        return flags::Flag{f->key(), example_value(*f), false, boolean};
      },
      suggest_flag};
  return source;
}

void set_flag(Config& c, const std::string& key, const std::string& value,
              const std::string& spelled) {
  const Field* f = find_field_by_key(key);
  LOOM_CHECK(f, "no configuration field ", key);
  set_from_text(c, *f, value, " (from flag --" + spelled + ")");
}

void apply_overrides(Config& c, const std::vector<std::string>& args) {
  flags::Spec spec;
  spec.source = &flag_source();
  flags::Parsed parsed = flags::parse(args, spec);
  if (parsed.help)
    LOOM_USAGE("-h/--help is no configuration field; run loom train --help for them");
  for (const auto& item : parsed.items) set_flag(c, item.name, item.value, item.spelled);
}

void validate(const Config& c) {
  for (const auto& f : schema()) check_rule(c, f, "");

  const auto& m = c.model;
  if (m.kind == ModelKind::Gpt && m.width % m.heads != 0) {
    // Name the nearest head counts that would work.
    int64_t below = m.heads, above = m.heads;
    while (below > 1 && m.width % below != 0) --below;
    while (above <= m.width && m.width % above != 0) ++above;
    std::string options = std::to_string(below);
    if (above <= m.width) options += " or " + std::to_string(above);
    LOOM_USAGE("model.heads (", m.heads, ") must divide model.width (", m.width, "); use heads ",
               options, ", or change width");
  }

  const double sum = c.slim.core + c.slim.explore;
  if (!(sum > 0 && sum <= 1)) {
    LOOM_USAGE("slim.core + slim.explore must be in (0, 1], got ", number_text(c.slim.core), " + ",
               number_text(c.slim.explore), " = ", number_text(sum), "; ",
               sum > 0 ? "lower" : "raise", " slim.core or slim.explore");
  }

  const auto& p = c.parallel;
  if (p.grad_reduce == Precision::Bf16 && !exact_dp(p.dp_mode)) {
    LOOM_USAGE("parallel.grad_reduce = bf16 applies to dp_mode allreduce and zero1-3; dp_mode ",
               p.dp_mode, " compresses its exchange its own way; drop --grad-reduce");
  }

  if (p.dp_mode == DpMode::StreamingDiloco && c.diloco.overlap >= c.diloco.inner_steps)
    LOOM_USAGE("diloco.overlap (", c.diloco.overlap, ") must be below diloco.inner_steps (",
               c.diloco.inner_steps, "): a fragment's exchange ends before its next one starts");

  if (m.kind == ModelKind::Llama) {
    const int64_t kv = m.kv_heads ? m.kv_heads : m.heads;
    if (m.heads % kv != 0)
      LOOM_USAGE("model.kv_heads (", kv, ") must divide model.heads (", m.heads,
                 "): each key/value head serves a group of query heads");
    if ((m.width / m.heads) % 2 != 0)
      LOOM_USAGE("model.width / model.heads (", m.width / m.heads,
                 ") must be even: rotary embeddings turn pairs of dimensions");
  }

  const bool text_model = m.kind == ModelKind::Gpt || m.kind == ModelKind::Llama;
  const bool fits = c.data.kind == DataKind::Synthetic ||
                    c.data.kind == (text_model ? DataKind::Text : DataKind::FashionMnist);
  if (!fits) {
    LOOM_USAGE("model.kind ", quote(name_of(m.kind)), " does not fit data.kind ",
               quote(name_of(c.data.kind)), ": ", m.kind, " needs data.kind ",
               text_model ? "text" : "fashion-mnist", "|synthetic; change model.kind or data.kind");
  }
  if (!c.data.tokenizer.empty() && c.data.kind != DataKind::Text) {
    LOOM_USAGE("data.tokenizer applies to data.kind = text, not ", c.data.kind,
               "; drop --tokenizer");
  }
}

std::string to_toml(const Config& c) {
  std::ostringstream out;
  out << "# loom run configuration; rerun with: loom train --config <this file>\n";
  std::string section;
  for (const auto& f : schema()) {
    if (f.section != section) {
      section = f.section;
      out << "\n[" << section << "]\n";
    }
    out << f.name << " = " << toml_value(ref(c, f)) << "  # " << f.help << rule_text(f) << "\n";
  }
  return out.str();
}

std::vector<std::pair<std::string, std::string>> settings(const Config& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : schema()) out.emplace_back(f.section + "." + f.name, toml_value(ref(c, f)));
  return out;
}

}  // namespace loom::config

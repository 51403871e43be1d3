#pragma once
// Run configuration: TOML file sections [model] [data] [train] [parallel] [output] [slim]
// [quant] [diloco] [powersgd] [emulate], every field also a flag (--layers 4 or --model.layers 4).
// No libtorch or MPI here: the parser and its errors are tested fast.
#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace loom::flags {
struct Source;
}

namespace loom::config {

// Upper bounds of sizes, shared by the configuration, the planner's flags and checkpoint
// manifests: ranks and stages fit an int, and the products loom forms of the model's sizes
// stay far inside int64 (a model too large for the machine is refused by the memory check).
inline constexpr int64_t kMaxRanks = 1 << 20;         // dp, pp, tp, world; and loops
inline constexpr int64_t kMaxLayers = 1 << 20;        // layers, prefetched stages
inline constexpr int64_t kMaxWidth = 1 << 24;         // width, heads, SwiGLU units
inline constexpr int64_t kMaxSeqLen = 1 << 24;        // context length
inline constexpr int64_t kMaxMicrobatches = 1 << 20;  // per replica and step

// The fields with a fixed set of values are enums, parsed once here; the rest of loom compares
// enumerators, never spellings.
enum class ModelKind { Gpt, Mlp, Cnn, Llama };
enum class DataKind { Text, FashionMnist, Synthetic };
enum class Optimizer { AdamW, Sgd };
enum class LrSchedule { Cosine, Constant };
// What data parallelism exchanges (docs/zero.md, docs/slim-dp.md).
enum class DpMode {
  AllReduce,
  Zero1,
  Zero2,
  Zero3,
  Slim,
  Quant,
  Diloco,
  StreamingDiloco,
  PowerSgd
};
// parallel.comm: auto picks the launcher's backend (comm::launch_backend).
enum class CommChoice { Auto, Mpi, Gloo, Nccl };
// train.on_nan: what a step with a non-finite loss or gradient norm does.
enum class NanPolicy { Stop, Skip };
// parallel.recompute: activations recomputed in the backward instead of kept (gpt layers).
enum class Recompute { None, Selective, Full };
// train.device: where a rank computes (cuda: GPU LOCAL_RANK mod the GPUs it sees).
enum class Device { Cpu, Cuda };
// train.precision: fp32, or bf16 compute (autocast) over fp32 master weights and optimizer
// state. parallel.grad_reduce: the type data-parallel gradients travel in.
enum class Precision { Fp32, Bf16 };
// model.attention: the attention core as explicit softmax(q k^T) v, or one fused kernel
// (scaled_dot_product_attention: flash attention where the device has it).
enum class Attention { Standard, Flash };
// train.cpu_gemm: the library of float32 matrix products on the CPU (model/cpu_gemm.h): auto
// (oneDNN where it has float32 AVX-512 kernels, else the BLAS), the BLAS libtorch links (MKL
// in the x86 wheel), or oneDNN.
enum class CpuGemm { Auto, Blas, Onednn };
// parallel.placement: how the mesh numbers its ranks, tensor-parallel groups innermost
// (consecutive ranks, inside a machine), then
//   dp-inside        r = (pp_rank * dp + dp_rank) * tp + tp_rank: a dp group's ranks are
//                    consecutive (one machine when dp * tp ranks fit on it) and the pipeline
//                    stages span machines (their activations cross the network);
//   pipeline-inside  r = (dp_rank * pp + pp_rank) * tp + tp_rank: a pipeline's ranks are
//                    consecutive and the dp groups span machines (their gradients cross it).
enum class RankOrder { DpInside, PipelineInside };
inline int mesh_rank(RankOrder o, int dp, int pp, int tp, int pp_rank, int dp_rank, int tp_rank) {
  return (o == RankOrder::DpInside ? pp_rank * dp + dp_rank : dp_rank * pp + pp_rank) * tp +
         tp_rank;
}

// Each enum's spellings in TOML, flags and messages, in enumerator order.
template <typename E>
struct Names;
template <>
struct Names<ModelKind> {
  static constexpr std::array<std::string_view, 4> list{"gpt", "mlp", "cnn", "llama"};
};
template <>
struct Names<DataKind> {
  static constexpr std::array<std::string_view, 3> list{"text", "fashion-mnist", "synthetic"};
};
template <>
struct Names<Optimizer> {
  static constexpr std::array<std::string_view, 2> list{"adamw", "sgd"};
};
template <>
struct Names<LrSchedule> {
  static constexpr std::array<std::string_view, 2> list{"cosine", "constant"};
};
template <>
struct Names<DpMode> {
  static constexpr std::array<std::string_view, 9> list{
      "allreduce",        "zero1",   "zero2", "zero3", "slim", "quant", "diloco",
      "streaming-diloco", "powersgd"};
};
template <>
struct Names<CommChoice> {
  static constexpr std::array<std::string_view, 4> list{"auto", "mpi", "gloo", "nccl"};
};

template <>
struct Names<NanPolicy> {
  static constexpr std::array<std::string_view, 2> list{"stop", "skip"};
};
template <>
struct Names<Recompute> {
  static constexpr std::array<std::string_view, 3> list{"none", "selective", "full"};
};

template <>
struct Names<Device> {
  static constexpr std::array<std::string_view, 2> list{"cpu", "cuda"};
};
template <>
struct Names<Precision> {
  static constexpr std::array<std::string_view, 2> list{"fp32", "bf16"};
};
template <>
struct Names<Attention> {
  static constexpr std::array<std::string_view, 2> list{"standard", "flash"};
};

template <>
struct Names<CpuGemm> {
  static constexpr std::array<std::string_view, 3> list{"auto", "blas", "onednn"};
};

template <>
struct Names<RankOrder> {
  static constexpr std::array<std::string_view, 2> list{"dp-inside", "pipeline-inside"};
};

template <typename E>
concept Choice = std::is_enum_v<E> && requires {
  Names<E>::list;
};

template <Choice E>
std::string name_of(E e) {
  return std::string(Names<E>::list.at(static_cast<size_t>(e)));
}
// The enumerator spelled `text`, if any.
template <Choice E>
std::optional<E> parse_choice(std::string_view text) {
  for (size_t i = 0; i < Names<E>::list.size(); ++i)
    if (Names<E>::list[i] == text) return static_cast<E>(i);
  return std::nullopt;
}
template <Choice E>
std::ostream& operator<<(std::ostream& os, E e) {
  return os << Names<E>::list.at(static_cast<size_t>(e));
}

// The language models (token input, transformer layers): gpt and llama.
inline bool is_transformer(ModelKind k) {
  return k == ModelKind::Gpt || k == ModelKind::Llama;
}

// 1, 2 or 3 for the ZeRO modes, 0 for the others.
inline int zero_level(DpMode m) {
  return m == DpMode::Zero1 ? 1 : m == DpMode::Zero2 ? 2 : m == DpMode::Zero3 ? 3 : 0;
}
// Modes whose replicas each train parameters of their own between meetings (their parameters
// and optimizer state are saved per replica; nothing maps them onto another dp).
inline bool per_replica(DpMode m) {
  return m == DpMode::Slim || m == DpMode::Diloco || m == DpMode::StreamingDiloco;
}
// The exact modes (every replica applies the mean gradient in fp32 or bf16): allreduce and
// zero1-3. The others compress or delay the exchange their own way; the planner does not
// model them and parallel.grad_reduce does not apply to them.
inline bool exact_dp(DpMode m) {
  return m == DpMode::AllReduce || zero_level(m) > 0;
}

struct ModelConfig {
  ModelKind kind = ModelKind::Gpt;
  int64_t vocab = 256;                        // gpt: byte-level
  int64_t seq_len = 128;                      // gpt: T
  int64_t width = 256;                        // gpt: D; mlp: hidden units
  int64_t layers = 4;                         // gpt: transformer blocks; mlp: hidden layers
  int64_t heads = 4;                          // gpt: attention heads (must divide width)
  int64_t classes = 10;                       // mlp/cnn
  Attention attention = Attention::Standard;  // gpt, llama
  // llama: grouped-query attention, SwiGLU, rotary positions (model/llama.cpp).
  int64_t kv_heads = 0;         // key/value heads; 0 = heads
  int64_t ffn_width = 0;        // SwiGLU hidden units; 0 = a multiple of 64 >= 8 * width / 3
  bool tie_embeddings = false;  // the head is the token embedding (gpt, llama)
  bool head_bias = false;       // gpt: the head adds a bias (GPT-2's does not)
  double rope_theta = 10000.0;

  bool operator==(const ModelConfig&) const = default;
};

// llama's SwiGLU width: model.ffn_width, or the smallest multiple of 64 >= 8 * width / 3.
inline int64_t llama_ffn_width(const ModelConfig& c) {
  if (c.ffn_width) return c.ffn_width;
  const int64_t units = (8 * c.width + 2) / 3;  // ceil(8 * width / 3)
  return (units + 63) / 64 * 64;
}

struct DataConfig {
  DataKind kind = DataKind::Text;
  std::string path;       // text: file or folder; fashion-mnist: folder; "" = default
  std::string tokenizer;  // text: SentencePiece model (loom tokenizer train); "" = bytes
  int64_t synthetic_size = 65536;
  double test_fraction = 0.05;  // text: held-out tail

  bool operator==(const DataConfig&) const = default;
};

struct TrainConfig {
  int64_t steps = 100;
  int64_t global_batch = 64;  // G = dp * microbatches * micro-batch size
  int64_t microbatches = 1;   // m, per replica per step
  Optimizer optimizer = Optimizer::AdamW;
  double lr = 3e-4;
  double min_lr = 0.0;
  int64_t warmup = 0;  // steps of linear warm-up
  LrSchedule lr_schedule = LrSchedule::Cosine;
  double momentum = 0.9;  // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adamw
  double clip = 0.0;                              // global-norm clipping; 0 = off
  int64_t eval_every = 0;                         // steps; 0 = only at the end
  int64_t eval_batches = 8;                       // batches of global_batch samples per evaluation
  bool final_eval = true;                         // the whole test split after the last step
  uint64_t seed = 1234;
  int64_t threads = 1;  // compute threads per rank
  NanPolicy on_nan = NanPolicy::Stop;
  Device device = Device::Cpu;
  Precision precision = Precision::Fp32;
  CpuGemm cpu_gemm = CpuGemm::Auto;

  bool operator==(const TrainConfig&) const = default;
};

struct ParallelConfig {
  int64_t dp = 0;  // 0 = world / (pp * tp)
  int64_t pp = 1;
  int64_t tp = 1;                  // tensor-parallel ranks per stage (Megatron-style, gpt)
  bool sequence_parallel = false;  // with tp > 1: activations cut along the sequence
  int64_t loops = 1;
  std::string schedule = "1f1b";    // gpipe | 1f1b | interleaved | bfs | zb-h1 | zbv
  std::string schedule_file;        // custom CSV schedule (overrides schedule)
  std::string partition = "flops";  // flops | uniform | "2,5,9" cut points (block indices)
  DpMode dp_mode = DpMode::AllReduce;
  CommChoice comm = CommChoice::Auto;
  double bucket_mib = 25.0;
  bool reshard_after_forward = true;  // zero3
  int64_t max_unsharded = 2;          // zero3 prefetch bound
  Recompute recompute = Recompute::None;
  Precision grad_reduce = Precision::Fp32;  // allreduce and zero modes
  RankOrder placement = RankOrder::DpInside;

  bool operator==(const ParallelConfig&) const = default;
};

struct SlimConfig {
  double core = 0.2;      // c: fraction of coordinates in the core set
  double explore = 0.1;   // e: fraction in the explorer set
  int64_t period = 1;     // tau: steps between syncs
  int64_t refresh = 10;   // R: syncs between core-set refreshes
  double lambda = 1.0;    // significance weight of the running update
  int64_t full_sync = 0;  // F: full sync every F syncs; 0 = never

  bool operator==(const SlimConfig&) const = default;
};

struct QuantConfig {
  int64_t bits = 8;         // 8 | 4 | 3 | 2
  int64_t block = 256;      // values per scale
  int64_t gather_bits = 0;  // the all-gathered mean's bits; 0 = bits
  double rms_clip = 0;      // error-fed shards: clip at rms_clip x the block's RMS; 0 = never
  bool entropy = false;     // entropy-code (zstd) the codes of both phases

  bool operator==(const QuantConfig&) const = default;
};

// dp-mode diloco (Douillard et al. 2023): H inner steps of train.optimizer on each replica, then
// an outer step on the replicas' mean parameter change (parallel/diloco_sync.h).
struct DilocoConfig {
  int64_t inner_steps = 10;     // H: local steps between outer steps
  double outer_lr = 0.7;        // the outer optimizer's learning rate
  double outer_momentum = 0.9;  // its momentum (0 = plain SGD)
  bool nesterov = true;         // Nesterov momentum
  // streaming-diloco only (Douillard et al. 2025): the stage's parameters in `fragments`
  // groups, fragment f meeting at steps f*H/fragments + kH; the outer gradient in
  // `outer_bits` (32 = fp32, 8, 4 or 2: blockwise quantized); its exchange overlapped with the
  // next `overlap` inner steps, after which the replica's parameters become
  // mix * own + (1 - mix) * the new global ones.
  int64_t fragments = 4;
  int64_t outer_bits = 4;
  int64_t overlap = 1;
  double mix = 0.5;

  bool operator==(const DilocoConfig&) const = default;
};

// dp-mode powersgd (Vogels et al. 2019): each gradient matrix M (plus this replica's error)
// sent as rank-r factors P = M Q and Q = M^T P, two all-reduces per step
// (parallel/powersgd_sync.h).
struct PowerSgdConfig {
  int64_t rank = 4;        // r
  bool warm_start = true;  // Q starts from the previous step's
  int64_t start_step = 0;  // steps of plain all-reduce before compressing

  bool operator==(const PowerSgdConfig&) const = default;
};

struct EmulateConfig {
  std::string bandwidth;  // e.g. "1Gbit", "10Gbit", "100Mbit"; "" = off
  std::string latency;    // e.g. "50us", "1ms"; "" = off

  bool operator==(const EmulateConfig&) const = default;
};

struct OutputConfig {
  std::string dir = "runs/latest";
  int64_t checkpoint_every = 0;  // steps; 0 = only at the end
  int64_t keep = 2;              // complete checkpoints kept (the newest ones)
  int64_t host_copies = 1;       // run folders of their own: other hosts keeping each rank file
  bool async_save = false;       // a checkpoint's files written while the next steps train
  bool overwrite = false;        // start afresh in a folder that holds another run
  bool progress = true;          // progress bar when stderr is a terminal
  std::string resume;            // checkpoint folder to resume from ("" = fresh start)
  std::string trace;             // Chrome trace JSON of the measured timeline ("" = none)
  bool memory_report = false;    // memory-rankN.txt: what each rank holds at its peak
  int64_t calibrate_every = 0;  // steps between speed calibrations (profile/calibration.h); 0 = off
  int64_t sample_every = 0;     // steps between text samples printed by rank 0; 0 = off

  bool operator==(const OutputConfig&) const = default;
};

struct Config {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  ParallelConfig parallel;
  SlimConfig slim;
  QuantConfig quant;
  DilocoConfig diloco;
  PowerSgdConfig powersgd;
  EmulateConfig emulate;
  OutputConfig output;

  bool operator==(const Config&) const = default;
};

// One field of the schema, for --help and error messages.
struct FieldInfo {
  std::string section;  // "model"
  std::string name;     // "layers"
  std::string type;     // "int", "float", "string", "bool"
  std::string help;     // one line, with the allowed values or range
  std::string default_value;
};
const std::vector<FieldInfo>& fields();

// Loads a TOML file (throws loom::UsageError: missing file, parse error with line, unknown
// section or field, wrong type, value out of range). Fields not in the file keep their
// defaults. Cross-field rules are not checked here: call validate() after the overrides.
Config load_file(const std::string& path);
Config from_toml_string(const std::string& text, const std::string& origin = "<string>");
// Every field as a flag of the one flag parser (flags/flags.h): --layers, --model.layers,
// --seq-len, --slim-core (the first "-" after a section reads as "."), --dp_mode. A flag's
// name is its field's key ("model.layers"); a short name two sections share is an error.
const flags::Source& flag_source();
// Sets the field `key` from a flag's text, checking the value's own range; `spelled` (as
// typed, without "--") names the flag in errors. Cross-field rules are left to validate() so
// that a later flag can still fix an earlier value.
void set_flag(Config& c, const std::string& key, const std::string& value,
              const std::string& spelled);
// Parses "--name value" / "--section.name value" / "--name=value" overrides and applies them
// in order; anything else is an error.
void apply_overrides(Config& c, const std::vector<std::string>& args);
// Checks ranges and cross-field rules that do not need the world size (heads | width, ...).
void validate(const Config& c);
// Serialized back to TOML (stored next to metrics and checkpoints).
std::string to_toml(const Config& c);
// Every field as ("section.name", its value as to_toml writes it), in the schema's order.
std::vector<std::pair<std::string, std::string>> settings(const Config& c);

// Parsers shared with the CLI: "1Gbit" -> bytes/s, "50us" -> seconds.
double parse_bandwidth(const std::string& text);
double parse_duration(const std::string& text);

}  // namespace loom::config

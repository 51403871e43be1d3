#include "loom/train/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/log.h"
#include "loom/train/preflight.h"

namespace loom::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "loom-checkpoint-3";

std::string quoted(const std::string& s) {
  return "\"" + s + "\"";
}

std::string list(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// "[0, 3, 5]" -> {0, 3, 5}, each in [lo, hi].

// The value of "key" in the manifest's text: a string's contents or a number's digits.
std::string field(const std::string& json, const std::string& key, const std::string& file) {
  std::smatch mt;
  std::regex re("\"" + key + "\"\\s*:\\s*(\"([^\"]*)\"|(-?[0-9]+))");
  if (!std::regex_search(json, mt, re))
    LOOM_USAGE("checkpoint manifest '", file, "' lacks \"", key,
               "\"; it is corrupt or not a loom checkpoint");
  return mt[2].matched ? mt[2].str() : mt[3].str();
}

int64_t number(const std::string& text, const std::string& key, const std::string& file, int64_t lo,
               int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    LOOM_USAGE("checkpoint manifest '", file, "' has ", key, " = ", text, ", outside ", lo, "..",
               hi, "; it is corrupt");
  return v;
}

std::vector<int> parse_list(const std::string& text, const std::string& key,
                            const std::string& file, int lo, int hi) {
  std::vector<int> out;
  std::regex num("-?[0-9]+");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), num); it != std::sregex_iterator();
       ++it)
    out.push_back(static_cast<int>(number(it->str(), key, file, lo, hi)));
  return out;
}

}  // namespace

Manifest describe_run(const config::Config& cfg, const Resolved& r, int world) {
  Manifest m;
  m.world = world;
  m.dp = r.dp;
  m.pp = r.pp;
  m.tp = r.tp;
  m.loops = r.loops;
  m.placement = std::string(schedule::placement_name(r.placement));
  m.dp_mode = config::name_of(cfg.parallel.dp_mode);
  m.schedule = cfg.parallel.schedule_file.empty() ? cfg.parallel.schedule : "custom";
  m.optimizer = config::name_of(cfg.train.optimizer);
  m.loom_version = LOOM_VERSION;
  m.model = cfg.model;
  return m;
}

std::string manifest_to_json(const Manifest& m) {
  std::ostringstream os;
  const auto& md = m.model;
  os << "{\"format\": \"" << kFormat << "\", \"loom_version\": " << quoted(m.loom_version)
     << ", \"step\": " << m.step << ",\n \"world\": " << m.world << ", \"dp\": " << m.dp
     << ", \"pp\": " << m.pp << ", \"tp\": " << m.tp << ", \"loops\": " << m.loops
     << ", \"placement\": " << quoted(m.placement) << ", \"dp_mode\": " << quoted(m.dp_mode)
     << ", \"schedule\": " << quoted(m.schedule) << ",\n \"optimizer\": " << quoted(m.optimizer)
     << ", \"dtype\": " << quoted(m.dtype) << ",\n \"model\": " << quoted(config::name_of(md.kind))
     << ", \"vocab\": " << md.vocab << ", \"seq_len\": " << md.seq_len
     << ", \"width\": " << md.width << ", \"layers\": " << md.layers << ", \"heads\": " << md.heads
     << ", \"classes\": " << md.classes;
  if (config::is_transformer(md.kind)) os << ", \"tie_embeddings\": " << int(md.tie_embeddings);
  if (md.kind == config::ModelKind::Gpt) os << ", \"head_bias\": " << int(md.head_bias);
  if (md.kind == config::ModelKind::Llama)
    os << ", \"kv_heads\": " << md.kv_heads << ", \"ffn_width\": " << md.ffn_width
       << ", \"rope_theta\": " << quoted(detail::concat(md.rope_theta));
  os << ",\n \"blocks\": " << m.blocks << ", \"partition\": " << list(m.first)
     << ",\n \"files\": [";
  for (size_t r = 0; r < m.files.size(); ++r) {
    const Manifest::File& f = m.files[r];
    os << (r ? ",\n   " : "\n   ") << "{\"rank\": " << r << ", \"file\": " << quoted(f.name)
       << ", \"bytes\": " << f.bytes << ", \"crc32\": " << f.crc32 << ", \"dp_rank\": " << f.dp_rank
       << ", \"stages\": " << list(f.stages) << "}";
  }
  os << "]}\n";
  return os.str();
}

std::vector<std::string> complete_checkpoints(const std::string& root) {
  std::vector<std::string> complete;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory(ec) && e.path().filename().string().rfind("step-", 0) == 0 &&
        fs::exists(e.path() / "manifest.json", ec))
      complete.push_back(e.path().string());
  std::sort(complete.begin(), complete.end());  // step-NNNNNN: names sort by step
  return complete;
}

namespace {

// The checkpoint `path` names: itself when it holds a manifest; in a run's checkpoint folder,
// the one `latest` names, or, when `latest` is missing or names no complete checkpoint (a
// folder deleted by hand, a damaged `latest`), the newest complete one, with a notice.
fs::path step_folder(const fs::path& path, bool quiet) {
  std::error_code ec;
  if (fs::exists(path / "manifest.json", ec)) return path;
  // A run's folder (runs/x) stands for its checkpoint folder (runs/x/checkpoint).
  if (!fs::exists(path / "latest", ec) && fs::is_directory(path / "checkpoint", ec))
    return step_folder(path / "checkpoint", quiet);
  std::string latest;
  bool has_latest = false;
  if (std::ifstream f(path / "latest"); f) {
    has_latest = true;
    std::getline(f, latest);
  }
  const bool named = !latest.empty() && latest.find('/') == std::string::npos;
  if (named && fs::exists(path / latest / "manifest.json", ec)) return path / latest;
  const std::vector<std::string> complete = complete_checkpoints(path.string());
  if (complete.empty()) return named ? path / latest : path;
  const std::string why =
      !has_latest ? "has no 'latest'"
                  : detail::concat("'latest' names '", latest, "', not a complete checkpoint");
  if (!quiet)
    log::info0(detail::concat("loom: '", path.string(), "' ", why,
                              "; using the newest complete one, ",
                              fs::path(complete.back()).filename().string()));
  return complete.back();
}

}  // namespace

Manifest read_manifest(const std::string& path, std::string* step_dir, bool quiet) {
  const fs::path dir = step_folder(path, quiet);
  const fs::path file = dir / "manifest.json";
  const std::string f = file.string();
  std::ifstream in(file);
  if (!in)
    LOOM_USAGE("no checkpoint at '", path, "' (", f,
               " not found); pass a run's folder, its checkpoint folder or one step folder");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string json = ss.str();
  const std::string format = field(json, "format", f);
  if (format != kFormat)
    LOOM_USAGE("checkpoint manifest '", f, "' is in format '", format, "', this loom reads '",
               kFormat, "'; resume it with the loom that wrote it, or start a new run");
  constexpr int64_t kBig = int64_t(1) << 40, kRanks = config::kMaxRanks;
  auto num = [&](const char* key, int64_t lo, int64_t hi) {
    return number(field(json, key, f), key, f, lo, hi);
  };
  Manifest m;
  m.loom_version = field(json, "loom_version", f);
  m.step = num("step", 0, kBig);
  m.world = static_cast<int>(num("world", 1, kRanks));
  m.dp = static_cast<int>(num("dp", 1, kRanks));
  m.pp = static_cast<int>(num("pp", 1, kRanks));
  m.tp = static_cast<int>(num("tp", 1, kRanks));
  m.loops = static_cast<int>(num("loops", 1, kRanks));
  // Keys that older manifests lack: their default is what that loom did.
  auto has = [&](const char* key) {
    return json.find(detail::concat("\"", key, "\"")) != std::string::npos;
  };
  if (has("placement")) {  // before V placement every checkpoint was looping
    m.placement = field(json, "placement", f);
    if (!schedule::parse_placement(m.placement))
      LOOM_USAGE("checkpoint manifest '", f, "' has placement '", m.placement, "'; it is corrupt");
  }
  m.dp_mode = field(json, "dp_mode", f);
  m.schedule = field(json, "schedule", f);
  m.optimizer = field(json, "optimizer", f);
  m.dtype = field(json, "dtype", f);
  const std::string kind = field(json, "model", f);
  auto parsed = config::parse_choice<config::ModelKind>(kind);
  if (!parsed) LOOM_USAGE("checkpoint manifest '", f, "' has model '", kind, "'; it is corrupt");
  m.model.kind = *parsed;
  m.model.vocab = num("vocab", 1, kBig);
  m.model.seq_len = num("seq_len", 1, config::kMaxSeqLen);
  m.model.width = num("width", 1, config::kMaxWidth);
  m.model.layers = num("layers", 1, config::kMaxLayers);
  m.model.heads = num("heads", 1, config::kMaxWidth);
  m.model.classes = num("classes", 1, kBig);
  // A key missing from an older manifest: what that loom's model had (a GPT: untied, with a
  // head bias).
  auto flag = [&](const char* key, bool before) { return has(key) ? num(key, 0, 1) != 0 : before; };
  if (config::is_transformer(m.model.kind)) m.model.tie_embeddings = flag("tie_embeddings", false);
  if (m.model.kind == config::ModelKind::Gpt) m.model.head_bias = flag("head_bias", true);
  if (m.model.kind == config::ModelKind::Llama) {
    m.model.kv_heads = num("kv_heads", 0, config::kMaxWidth);
    m.model.ffn_width = num("ffn_width", 0, config::kMaxWidth);
    m.model.rope_theta = std::stod(field(json, "rope_theta", f));
  }
  const int stages = m.pp * m.loops;
  m.blocks = static_cast<int>(num("blocks", 1, kBig));
  std::smatch part;
  if (!std::regex_search(json, part, std::regex("\"partition\": (\\[[-0-9, ]*\\])")))
    LOOM_USAGE("checkpoint manifest '", f, "' lacks \"partition\"; it is corrupt");
  m.first = parse_list(part[1].str(), "partition", f, 0, m.blocks - 1);
  if (static_cast<int>(m.first.size()) != stages || m.first.front() != 0 ||
      !std::is_sorted(m.first.begin(), m.first.end()))
    LOOM_USAGE("checkpoint manifest '", f, "' has a partition that does not cut ", m.blocks,
               " blocks into ", stages, " stages; it is corrupt");
  std::regex entry(
      "\\{\"rank\": ([0-9]+), \"file\": \"([-a-z0-9.]+)\", \"bytes\": ([0-9]+), \"crc32\": "
      "([0-9]+), \"dp_rank\": (-?[0-9]+), \"stages\": (\\[[0-9, ]*\\])\\}");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), entry);
       it != std::sregex_iterator(); ++it) {
    const auto& e = *it;
    const int64_t rank = number(e[1].str(), "a file's rank", f, 0, kRanks);
    if (rank != static_cast<int64_t>(m.files.size()))
      LOOM_USAGE("checkpoint manifest '", f, "' lists rank ", rank, " out of order; it is corrupt");
    Manifest::File file;
    file.name = e[2].str();
    file.bytes = number(e[3].str(), "a file's bytes", f, 0, kBig * 1024);
    file.crc32 = static_cast<uint32_t>(number(e[4].str(), "a file's crc32", f, 0, 0xffffffffLL));
    file.dp_rank = static_cast<int>(number(e[5].str(), "a file's dp_rank", f, -1, m.dp - 1));
    file.stages = parse_list(e[6].str(), "a file's stages", f, 0, stages - 1);
    m.files.push_back(std::move(file));
  }
  if (m.files.empty() || (m.files.size() > 1 && static_cast<int>(m.files.size()) != m.world))
    LOOM_USAGE("checkpoint manifest '", f, "' lists ", m.files.size(), " files for world ", m.world,
               "; it is corrupt");
  if (step_dir) *step_dir = dir.string();
  return m;
}

void check_file_size(const Manifest& m, const std::string& step_dir, size_t i) {
  const Manifest::File& want = m.files.at(i);
  const std::string f = (fs::path(step_dir) / want.name).string();
  std::error_code ec;
  const auto size = fs::file_size(f, ec);
  if (ec)
    LOOM_USAGE("checkpoint file '", f, "' is ",
               ec == std::errc::no_such_file_or_directory ? "missing"
                                                          : "unreadable (" + ec.message() + ")",
               "; the checkpoint is incomplete: resume from another checkpoint");
  if (static_cast<int64_t>(size) != want.bytes)
    LOOM_USAGE("checkpoint file '", f, "' is ", size, " bytes, its manifest says ", want.bytes,
               ": it is cut short, damaged or from another run; resume from another checkpoint");
}

bool Manifest::same_layout(const Manifest& run) const {
  return world == run.world && dp == run.dp && pp == run.pp && tp == run.tp && loops == run.loops &&
         placement == run.placement && first == run.first &&
         static_cast<int>(files.size()) == world;
}

std::string Manifest::layout() const {
  return detail::concat(
      "dp ", dp, " x pp ", pp, tp > 1 ? detail::concat(" x tp ", tp) : "", " x loops ", loops,
      placement == "looping" ? "" : ", " + placement + " placement", ", ", dp_mode);
}

std::string check_resumable(const Manifest& saved, const Manifest& run, const std::string& dir) {
  auto refuse = [&](const std::string& what, const auto& was, const auto& now) {
    LOOM_USAGE("checkpoint '", dir, "' was written with ", what, " = ", was, ", this run has ", now,
               "; resume with ", what, " = ", was, " (or start a new run in another --output.dir)");
  };
  const auto &a = saved.model, &b = run.model;
  if (a.kind != b.kind) refuse("model.kind", a.kind, b.kind);
  if (a.layers != b.layers) refuse("model.layers", a.layers, b.layers);
  if (a.width != b.width) refuse("model.width", a.width, b.width);
  if (a.heads != b.heads) refuse("model.heads", a.heads, b.heads);
  if (config::is_transformer(a.kind) && a.seq_len != b.seq_len)
    refuse("model.seq_len", a.seq_len, b.seq_len);
  if (config::is_transformer(a.kind) && a.vocab != b.vocab) refuse("model.vocab", a.vocab, b.vocab);
  if (!config::is_transformer(a.kind) && a.classes != b.classes)
    refuse("model.classes", a.classes, b.classes);
  auto text = [](bool v) { return v ? "true" : "false"; };
  if (a.tie_embeddings != b.tie_embeddings)
    refuse("model.tie_embeddings", text(a.tie_embeddings), text(b.tie_embeddings));
  if (a.head_bias != b.head_bias) refuse("model.head_bias", text(a.head_bias), text(b.head_bias));
  if (a.kind == config::ModelKind::Llama) {
    if (a.kv_heads != b.kv_heads) refuse("model.kv_heads", a.kv_heads, b.kv_heads);
    if (a.ffn_width != b.ffn_width) refuse("model.ffn_width", a.ffn_width, b.ffn_width);
  }
  if (saved.optimizer != run.optimizer) refuse("train.optimizer", saved.optimizer, run.optimizer);
  if (saved.dtype != run.dtype) refuse("dtype", saved.dtype, run.dtype);
  // Slim and DiLoCo replicas each train a model of their own (and its optimizer state); a run
  // with another number of such replicas starts from their mean (parallel/stage_state.h).
  auto per_replica = [](const std::string& mode) {
    const auto m = config::parse_choice<config::DpMode>(mode);
    return m && config::per_replica(*m);
  };
  const bool was_own = per_replica(saved.dp_mode), is_own = per_replica(run.dp_mode);
  const bool averaged = was_own && saved.dp > 1 && (!is_own || saved.dp != run.dp);
  const bool reshards = saved.world != run.world || saved.dp != run.dp || saved.pp != run.pp ||
                        saved.tp != run.tp || saved.loops != run.loops ||
                        saved.placement != run.placement || saved.dp_mode != run.dp_mode ||
                        saved.files.size() != static_cast<size_t>(saved.world);
  if (!reshards) return "";
  std::string line = detail::concat("resharding checkpoint step ", saved.step, " from ",
                                    saved.layout(), " to ", run.layout());
  if (saved.dp_mode == "quant" && (!(run.dp_mode == "quant") || saved.dp != run.dp))
    line += "; the quantization residual starts from zero";
  if (saved.dp_mode == "powersgd" && (!(run.dp_mode == "powersgd") || saved.dp != run.dp))
    line += "; PowerSGD's error feedback starts from zero";
  if (averaged)
    line += detail::concat("; the ", saved.dp, " ", saved.dp_mode,
                           " replicas' models and optimizer state are averaged");
  if (is_own && !was_own) line += "; " + run.dp_mode + "'s global copy starts from the parameters";
  return line;
}

uint32_t crc32_of(std::string_view bytes) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  while (!bytes.empty()) {  // zlib takes at most 4 GiB - 1 per call
    const uInt n = static_cast<uInt>(std::min<size_t>(bytes.size(), 1u << 30));
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), n);
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace loom::train

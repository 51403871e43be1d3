#include "loom/train/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "loom/common/error.h"
#include "loom/common/files.h"
#include "loom/common/log.h"
#include "loom/plan/transformer.h"
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

// A manifest's values, each checked: a missing key, a value of another type or out of range
// is one line naming the file, the key and the entry.
class ManifestJson {
 public:
  ManifestJson(const std::string& text, std::string file) : file_(std::move(file)) {
    try {
      json_ = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      LOOM_USAGE("checkpoint manifest '", file_, "' is not JSON (cut short or damaged, at byte ",
                 std::min<size_t>(e.byte, text.size()), " of ", text.size(),
                 "); resume from another checkpoint");
    }
    if (!json_.is_object())
      LOOM_USAGE("checkpoint manifest '", file_, "' is not a loom checkpoint manifest (",
                 json_.type_name(), ", not an object)");
  }
  const nlohmann::json& root() const { return json_; }
  bool has(const char* key) const { return json_.contains(key); }

  // `entry`: "" for the manifest's own keys, else the entry's name ("the entry of rank 1").
  const nlohmann::json& at(const nlohmann::json& obj, const char* key,
                           const std::string& entry = "") const {
    if (!obj.is_object() || !obj.contains(key))
      LOOM_USAGE("checkpoint manifest '", file_, "' lacks \"", key, "\"", in(entry),
                 "; it is corrupt or not a loom checkpoint");
    return obj.at(key);
  }
  std::string text(const char* key) const {
    const nlohmann::json& v = at(json_, key);
    if (!v.is_string()) wrong(key, v, "", "not a string");
    return v.get<std::string>();
  }
  int64_t integer(const nlohmann::json& obj, const char* key, int64_t lo, int64_t hi,
                  const std::string& entry = "") const {
    return checked(at(obj, key, entry), key, lo, hi, entry);
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    return integer(json_, key, lo, hi);
  }
  const nlohmann::json& list(const nlohmann::json& obj, const char* key,
                             const std::string& entry = "") const {
    const nlohmann::json& v = at(obj, key, entry);
    if (!v.is_array()) wrong(key, v, entry, "not a list");
    return v;
  }
  std::vector<int> integers(const nlohmann::json& obj, const char* key, int lo, int hi,
                            const std::string& entry = "") const {
    std::vector<int> out;
    for (const auto& x : list(obj, key, entry))
      out.push_back(static_cast<int>(checked(x, key, lo, hi, entry)));
    return out;
  }

 private:
  static std::string in(const std::string& entry) { return entry.empty() ? "" : " in " + entry; }
  [[noreturn]] void wrong(const char* key, const nlohmann::json& v, const std::string& entry,
                          const std::string& why) const {
    LOOM_USAGE("checkpoint manifest '", file_, "' has ", key, " = ", v.dump(), in(entry), ", ", why,
               "; it is corrupt");
  }
  int64_t checked(const nlohmann::json& v, const char* key, int64_t lo, int64_t hi,
                  const std::string& entry) const {
    if (!v.is_number()) wrong(key, v, entry, "not a number");
    const std::string range = detail::concat(lo, "..", hi);
    if (!v.is_number_integer()) wrong(key, v, entry, "not a whole number in " + range);
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(hi))
      wrong(key, v, entry, "outside " + range);
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) wrong(key, v, entry, "outside " + range);
    return x;
  }

  std::string file_;
  nlohmann::json json_;
};

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
       << ", \"stages\": " << list(f.stages);
    if (f.index_crc32) os << ", \"index_crc32\": " << *f.index_crc32;
    os << "}";
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

int64_t folder_step(const std::string& name) {
  const size_t at = name.find("step-");
  if (at == std::string::npos || at + 5 >= name.size() ||
      !std::isdigit(static_cast<unsigned char>(name[at + 5])))
    return -1;
  return std::atoll(name.c_str() + at + 5);
}

std::string checkpoint_before(const std::string& resume, const std::string& dir) {
  std::error_code ec;
  const fs::path step = fs::path(dir);
  const int64_t damaged = folder_step(step.filename().string());
  if (dir.empty() || fs::equivalent(resume, dir, ec) || damaged < 0) return "";
  std::string before;
  int64_t newest = -1;
  for (const std::string& f : complete_checkpoints(step.parent_path().string())) {
    const int64_t s = folder_step(fs::path(f).filename().string());
    if (s < damaged && s > newest) newest = s, before = f;
  }
  return before;
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
  const std::vector<std::string> complete = complete_checkpoints(path.string());
  std::string why;
  if (named && fs::exists(path / latest / "manifest.json", ec)) {
    // `latest` follows a save's manifest: a newer complete checkpoint is one whose save was cut
    // short between the two.
    if (complete.empty() ||
        folder_step(fs::path(complete.back()).filename().string()) <= folder_step(latest))
      return path / latest;
    why = detail::concat("'latest' names '", latest,
                         "', before its newest complete checkpoint (a save cut short)");
  } else {
    if (complete.empty()) return named ? path / latest : path;
    why = !has_latest ? "has no 'latest'"
                      : detail::concat("'latest' names '", latest, "', not a complete checkpoint");
  }
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
  const ManifestJson j(ss.str(), f);
  const std::string format = j.text("format");
  if (format != kFormat)
    LOOM_USAGE("checkpoint manifest '", f, "' is in format '", format, "', this loom reads '",
               kFormat, "'; resume it with the loom that wrote it, or start a new run");
  constexpr int64_t kBig = int64_t(1) << 40, kRanks = config::kMaxRanks;
  Manifest m;
  m.loom_version = j.text("loom_version");
  m.step = j.integer("step", 0, kBig);
  m.world = static_cast<int>(j.integer("world", 1, kRanks));
  m.dp = static_cast<int>(j.integer("dp", 1, kRanks));
  m.pp = static_cast<int>(j.integer("pp", 1, kRanks));
  m.tp = static_cast<int>(j.integer("tp", 1, kRanks));
  m.loops = static_cast<int>(j.integer("loops", 1, kRanks));
  // Keys that older manifests lack: their default is what that loom did.
  if (j.has("placement")) {  // before V placement every checkpoint was looping
    m.placement = j.text("placement");
    if (!schedule::parse_placement(m.placement))
      LOOM_USAGE("checkpoint manifest '", f, "' has placement '", m.placement, "'; it is corrupt");
  }
  m.dp_mode = j.text("dp_mode");
  m.schedule = j.text("schedule");
  m.optimizer = j.text("optimizer");
  m.dtype = j.text("dtype");
  const std::string kind = j.text("model");
  auto parsed = config::parse_choice<config::ModelKind>(kind);
  if (!parsed) LOOM_USAGE("checkpoint manifest '", f, "' has model '", kind, "'; it is corrupt");
  m.model.kind = *parsed;
  m.model.vocab = j.integer("vocab", 1, kBig);
  m.model.seq_len = j.integer("seq_len", 1, config::kMaxSeqLen);
  m.model.width = j.integer("width", 1, config::kMaxWidth);
  m.model.layers = j.integer("layers", 1, config::kMaxLayers);
  m.model.heads = j.integer("heads", 1, config::kMaxWidth);
  m.model.classes = j.integer("classes", 1, kBig);
  // A key missing from an older manifest: what that loom's model had (a GPT: untied, with a
  // head bias).
  auto flag = [&](const char* key, bool before) {
    return j.has(key) ? j.integer(key, 0, 1) != 0 : before;
  };
  if (config::is_transformer(m.model.kind)) m.model.tie_embeddings = flag("tie_embeddings", false);
  if (m.model.kind == config::ModelKind::Gpt) m.model.head_bias = flag("head_bias", true);
  if (m.model.kind == config::ModelKind::Llama) {
    m.model.kv_heads = j.integer("kv_heads", 0, config::kMaxWidth);
    m.model.ffn_width = j.integer("ffn_width", 0, config::kMaxWidth);
    const std::string theta = j.text("rope_theta");  // written as text: every digit kept
    char* end = nullptr;
    m.model.rope_theta = std::strtod(theta.c_str(), &end);
    if (theta.empty() || *end != 0 || !(m.model.rope_theta > 0) ||
        !std::isfinite(m.model.rope_theta))
      LOOM_USAGE("checkpoint manifest '", f, "' has rope_theta = \"", theta,
                 "\", not a positive number; it is corrupt");
  }
  const int stages = m.pp * m.loops;
  m.blocks = static_cast<int>(j.integer("blocks", 1, kBig));
  m.first = j.integers(j.root(), "partition", 0, m.blocks - 1);
  if (static_cast<int>(m.first.size()) != stages || m.first.front() != 0 ||
      !std::is_sorted(m.first.begin(), m.first.end()))
    LOOM_USAGE("checkpoint manifest '", f, "' has a partition that does not cut ", m.blocks,
               " blocks into ", stages, " stages; it is corrupt");
  const nlohmann::json& files = j.list(j.root(), "files");
  if (files.empty() || (files.size() > 1 && static_cast<int64_t>(files.size()) != m.world))
    LOOM_USAGE("checkpoint manifest '", f, "' lists ", files.size(), " files for world ", m.world,
               "; it is corrupt");
  for (const nlohmann::json& e : files) {
    const std::string entry = detail::concat("the entry of rank ", m.files.size());
    if (j.integer(e, "rank", 0, kRanks, entry) != static_cast<int64_t>(m.files.size()))
      LOOM_USAGE("checkpoint manifest '", f, "' lists rank ", e.at("rank").dump(),
                 " out of order; it is corrupt");
    Manifest::File file;
    const nlohmann::json& name = j.at(e, "file", entry);
    file.name = name.is_string() ? name.get<std::string>() : "";
    if (file.name.empty() ||
        file.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-.") !=
            std::string::npos ||
        file.name[0] == '.')
      LOOM_USAGE("checkpoint manifest '", f, "' names file ", name.dump(), " in ", entry,
                 "; it is corrupt");
    file.bytes = j.integer(e, "bytes", 0, kBig * 1024, entry);
    file.crc32 = static_cast<uint32_t>(j.integer(e, "crc32", 0, 0xffffffffLL, entry));
    file.dp_rank = static_cast<int>(j.integer(e, "dp_rank", -1, m.dp - 1, entry));
    file.stages = j.integers(e, "stages", 0, stages - 1, entry);
    if (e.contains("index_crc32"))
      file.index_crc32 = static_cast<uint32_t>(j.integer(e, "index_crc32", 0, 0xffffffffLL, entry));
    m.files.push_back(std::move(file));
  }
  // A model far larger than the files (a width edited by hand) would be built before anything
  // else noticed: its parameters alone (a lower bound: the matrices, embedding and head) must
  // fit in the files, which hold them at least once, in fp32.
  if (config::is_transformer(m.model.kind)) {
    config::ModelConfig c = m.model;
    c.head_bias = false;  // a lower bound without it
    const double params = plan::total_params(plan::transformer_of(c));
    double held = 0;
    for (const Manifest::File& file : m.files) held += double(file.bytes);
    if (params * 4 > held)
      LOOM_USAGE("checkpoint manifest '", f, "' describes a model of ", params,
                 " parameters (width ", m.model.width, ", ", m.model.layers,
                 " layers), more than its files hold (", int64_t(held), " bytes); it is corrupt");
  }
  if (step_dir) *step_dir = dir.string();
  return m;
}

void check_file_size(const Manifest& m, const std::string& step_dir, size_t i) {
  const Manifest::File& want = m.files.at(i);
  const std::string f = (fs::path(step_dir) / want.name).string();
  std::error_code ec;
  const auto size = fs::file_size(f, ec);
  if (ec)
    throw DamagedCheckpoint(detail::concat(
        "checkpoint file '", f, "' is ",
        ec == std::errc::no_such_file_or_directory ? "missing"
                                                   : "unreadable (" + ec.message() + ")",
        "; the checkpoint is incomplete: resume from another checkpoint"));
  if (static_cast<int64_t>(size) != want.bytes)
    throw DamagedCheckpoint(detail::concat(
        "checkpoint file '", f, "' is ", size, " bytes, its manifest says ", want.bytes,
        ": it is cut short, damaged or from another run; resume from another checkpoint"));
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

void check_steps_left(int64_t saved_step, int64_t steps, const std::string& dir) {
  if (saved_step > steps)
    LOOM_USAGE("checkpoint '", dir, "' is of step ", saved_step, ", past train.steps = ", steps,
               "; pass --steps above ", saved_step,
               " to train on, or resume an earlier checkpoint");
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

uint32_t crc32_of(std::string_view bytes, uint32_t previous) {
  uLong crc = previous;
  while (!bytes.empty()) {  // zlib takes at most 4 GiB - 1 per call
    const uInt n = static_cast<uInt>(std::min<size_t>(bytes.size(), 1u << 30));
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), n);
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

uint32_t crc32_joined(uint32_t first, uint32_t second, int64_t second_bytes) {
  return static_cast<uint32_t>(::crc32_combine64(first, second, second_bytes));
}

}  // namespace loom::train

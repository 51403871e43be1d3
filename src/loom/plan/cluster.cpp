#include "loom/plan/cluster.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "loom/common/error.h"
#include "loom/config/toml_parse.h"

namespace loom::plan {
namespace {

// Reads keys of one table and names the file and key in every error.
class Reader {
 public:
  Reader(const toml::table* t, std::string origin, std::string section)
      : t_(t), origin_(std::move(origin)), section_(std::move(section)) {}

  bool has(const std::string& key) const { return t_ && t_->contains(key); }
  bool is_array(const std::string& key) const {
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    return n && n->is_array();
  }

  double number(const std::string& key, double lo, double hi,
                std::optional<double> dflt = {}) const {
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n) {
      if (dflt) return *dflt;
      fail(key, "is missing; add it");
    }
    std::optional<double> v = n->value<double>();
    if (!v || !std::isfinite(*v)) fail(key, "must be a number");
    if (*v < lo || *v > hi) fail(key, detail::concat("must be in [", lo, ", ", hi, "], got ", *v));
    return *v;
  }

  int64_t integer(const std::string& key, int64_t lo, int64_t hi,
                  std::optional<int64_t> dflt = {}) const {
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n && dflt) return *dflt;
    if (!n) fail(key, "is missing; add it");
    std::optional<int64_t> v = n->value_exact<int64_t>();
    if (!v) fail(key, "must be an integer");
    if (*v < lo || *v > hi) fail(key, detail::concat("must be in [", lo, ", ", hi, "], got ", *v));
    return *v;
  }

  std::string text(const std::string& key, std::optional<std::string> dflt = {}) const {
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n) {
      if (dflt) return *dflt;
      fail(key, "is missing; add it");
    }
    std::optional<std::string> v = n->value<std::string>();
    if (!v) fail(key, "must be a string");
    return *v;
  }

  bool boolean(const std::string& key, bool dflt) const {
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n) return dflt;
    std::optional<bool> v = n->value<bool>();
    if (!v) fail(key, "must be true or false");
    return *v;
  }

  std::vector<double> numbers(const std::string& key) const {
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n) fail(key, "is missing; add an array of numbers");
    const toml::array* a = n->as_array();
    if (!a || a->empty()) fail(key, "must be a non-empty array of numbers");
    std::vector<double> out;
    for (const toml::node& e : *a) {
      std::optional<double> v = e.value<double>();
      if (!v || !std::isfinite(*v) || *v <= 0) fail(key, "must hold numbers > 0");
      out.push_back(*v);
    }
    return out;
  }

  const toml::table* table(const std::string& key) const {
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n) fail(key, "is missing; add it");
    if (!n->as_table()) fail(key, "must be a table like { bf16 = 312.0 }");
    return n->as_table();
  }

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    LOOM_USAGE(origin_, ": ", section_.empty() ? "" : "[" + section_ + "] ", key, " ", what);
  }

 private:
  const toml::table* t_;
  std::string origin_, section_;
};

const toml::table* section(const toml::table& root, const std::string& name,
                           const std::string& origin) {
  const toml::node* n = root.get(name);
  if (!n) LOOM_USAGE(origin, ": section [", name, "] is missing; see clusters/a100-80gb.toml");
  if (!n->as_table()) LOOM_USAGE(origin, ": ", name, " must be a section [", name, "]");
  return n->as_table();
}

Link read_link(const toml::table& root, const std::string& name, const std::string& origin) {
  Reader r(section(root, name, origin), origin, name);
  Link l;
  l.bandwidth = r.number("bandwidth_gbs", 1e-6, 1e6) * 1e9;
  l.efficiency = r.number("efficiency", 0.01, 1.0, 1.0);
  l.latency = r.number("latency_us", 0, 1e6) * 1e-6;
  return l;
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(6);
  os << v;
  std::string s = os.str();
  if (s.find_first_of(".eE") == std::string::npos && s.find("inf") == std::string::npos) s += ".0";
  return s;
}

// attention_forward/backward: one number each (any shape), or arrays with the shapes they were
// measured at (attention_head_size, attention_seq_len).
std::vector<AttentionKernel> read_attention(const Reader& eff) {
  if (!eff.has("attention_forward") && !eff.has("attention_backward")) return {};
  if (!eff.is_array("attention_forward") && !eff.is_array("attention_backward")) {
    if (eff.has("attention_head_size") || eff.has("attention_seq_len"))
      eff.fail("attention_head_size", "goes with arrays attention_forward and attention_backward");
    return {{0, 0, eff.number("attention_forward", 0.001, 1.0, 0.0),
             eff.number("attention_backward", 0.001, 1.0, 0.0)}};
  }
  const std::vector<double> forward = eff.numbers("attention_forward"),
                            backward = eff.numbers("attention_backward"),
                            head = eff.numbers("attention_head_size"),
                            seq = eff.numbers("attention_seq_len");
  for (const auto& [key, values] : {std::pair{"attention_backward", &backward},
                                    {"attention_head_size", &head},
                                    {"attention_seq_len", &seq}})
    if (values->size() != forward.size())
      eff.fail(key, detail::concat("must have as many values as attention_forward (",
                                   forward.size(), "), got ", values->size()));
  std::vector<AttentionKernel> out;
  for (size_t i = 0; i < forward.size(); ++i) {
    if (forward[i] > 1 || backward[i] > 1)
      eff.fail("attention_forward", "and attention_backward must hold fractions in (0, 1]");
    out.push_back({head[i], seq[i], forward[i], backward[i]});
  }
  return out;
}

void write_attention(std::ostream& os, const std::vector<AttentionKernel>& kernels) {
  if (kernels.empty()) return;
  if (kernels.size() == 1 && kernels[0].head_size <= 0) {
    if (kernels[0].forward > 0) os << "attention_forward = " << num(kernels[0].forward) << "\n";
    if (kernels[0].backward > 0) os << "attention_backward = " << num(kernels[0].backward) << "\n";
    return;
  }
  auto array = [&](const char* key, double AttentionKernel::*field) {
    os << key << " = [";
    for (size_t i = 0; i < kernels.size(); ++i) os << (i ? ", " : "") << num(kernels[i].*field);
    os << "]\n";
  };
  array("attention_head_size", &AttentionKernel::head_size);
  array("attention_seq_len", &AttentionKernel::seq_len);
  array("attention_forward", &AttentionKernel::forward);
  array("attention_backward", &AttentionKernel::backward);
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

// y at x = d, interpolated in log2(x) between the points around it; flat outside.
double interpolate_log2(const std::vector<double>& x, const std::vector<double>& y, double d) {
  if (d <= x.front()) return y.front();
  if (d >= x.back()) return y.back();
  size_t i = 1;
  while (x[i] < d) ++i;
  const double x0 = std::log2(x[i - 1]), x1 = std::log2(x[i]);
  const double t = (std::log2(d) - x0) / (x1 - x0);
  return y[i - 1] + t * (y[i] - y[i - 1]);
}

}  // namespace

double Cluster::gemm_fraction(double d) const {
  const double curve = gemm_size.empty() ? 1.0 : interpolate_log2(gemm_size, gemm_efficiency, d);
  return std::min(1.0, gemm_in_training * curve);
}

const AttentionKernel* Cluster::attention_kernel(double head_size, double seq_len) const {
  auto distance = [&](const AttentionKernel& k) {
    if (k.head_size <= 0) return 0.0;  // measured for any shape
    return std::abs(std::log2(k.head_size / head_size)) + std::abs(std::log2(k.seq_len / seq_len));
  };
  const AttentionKernel* best = nullptr;
  for (const AttentionKernel& k : attention)
    if (!best || distance(k) < distance(*best)) best = &k;
  return best;
}

double Cluster::peak(const std::string& p) const {
  auto it = peak_flops.find(p);
  if (it != peak_flops.end()) return it->second;
  std::string known;
  for (const auto& [k, v] : peak_flops) known += (known.empty() ? "" : ", ") + k;
  LOOM_USAGE("cluster '", name, "' has no peak for precision '", p, "'; it lists ", known);
}

Cluster parse_cluster(const std::string& text, const std::string& origin) {
  const toml::table root = config::parse_toml(text, origin);
  for (const auto& entry : root) {
    static const char* known[] = {"name",  "note",  "node",  "device",   "efficiency",
                                  "intra", "inter", "block", "optimizer"};
    const std::string key(entry.first.str());
    if (std::none_of(std::begin(known), std::end(known), [&](const char* k) { return key == k; }))
      LOOM_USAGE(origin, ": unknown key '", key,
                 "'; a cluster file has name, note, [node], [device], [efficiency], [intra], "
                 "[inter], [[block]], [optimizer]");
  }
  Cluster c;
  c.origin = origin;
  Reader top(&root, origin, "");
  c.name = top.text("name");
  c.note = top.text("note", "");

  Reader node(section(root, "node", origin), origin, "node");
  c.devices_per_node = static_cast<int>(node.integer("devices", 1, 1 << 16));
  c.shared = node.boolean("shared", false);
  c.cpu = node.text("cpu", "");
  c.oversubscribed = node.number("oversubscribed", 1, 100, 1.0);
  c.runtime_cpu = node.number("runtime_cpu", 1, 10, 1.0);

  Reader dev(section(root, "device", origin), origin, "device");
  c.memory_bytes = dev.number("memory_gb", 1e-6, 1e9) * 1e9;
  c.memory_bandwidth = dev.number("memory_bandwidth_gbs", 1e-6, 1e9) * 1e9;
  c.precision = dev.text("precision");
  Reader peaks(dev.table("peak_tflops"), origin, "device.peak_tflops");
  for (const auto& [k, v] : *dev.table("peak_tflops"))
    c.peak_flops[std::string(k.str())] = peaks.number(std::string(k.str()), 1e-9, 1e9) * 1e12;
  if (!c.peak_flops.count(c.precision))
    dev.fail("precision", "'" + c.precision + "' must be one of the keys of peak_tflops");

  Reader eff(section(root, "efficiency", origin), origin, "efficiency");
  c.gemm_size = eff.numbers("gemm_size");
  c.gemm_efficiency = eff.numbers("gemm");
  if (c.gemm_size.size() != c.gemm_efficiency.size())
    eff.fail("gemm", detail::concat("must have as many values as gemm_size (", c.gemm_size.size(),
                                    "), got ", c.gemm_efficiency.size()));
  for (size_t i = 0; i < c.gemm_size.size(); ++i) {
    if (i > 0 && c.gemm_size[i] <= c.gemm_size[i - 1]) eff.fail("gemm_size", "must be increasing");
    if (c.gemm_efficiency[i] > 1) eff.fail("gemm", "values must be fractions in (0, 1]");
  }
  // Above 1 where the benchmark under-reads what a training step's products reach (the H200's
  // back-to-back products: h200.toml).
  c.gemm_in_training = eff.number("gemm_in_training", 0.001, 2.0, 1.0);
  c.elementwise_efficiency = eff.number("elementwise", 0.001, 1.0);
  c.elementwise_in_training = eff.number("elementwise_in_training", 0.001, 1.0, 1.0);
  c.calibrated = eff.text("calibrated", "");
  c.attention = read_attention(eff);
  c.tp_overlap = eff.number("tp_overlap", 0, 1.0, 0.0);

  c.intra = read_link(root, "intra", origin);
  c.inter = read_link(root, "inter", origin);

  if (const toml::node* b = root.get("block")) {
    const toml::array* arr = b->as_array();
    if (!arr) LOOM_USAGE(origin, ": block must be an array of tables [[block]]");
    for (const toml::node& e : *arr) {
      const toml::table* t = e.as_table();
      if (!t) LOOM_USAGE(origin, ": every [[block]] must be a table");
      Reader r(t, origin, "block");
      BlockProfile p;
      p.kind = r.text("kind");
      if (p.kind != "embedding" && p.kind != "layer" && p.kind != "head")
        r.fail("kind", "must be embedding, layer or head, got '" + p.kind + "'");
      p.model = r.text("model", std::string("gpt"));
      if (p.model != "gpt" && p.model != "llama")
        r.fail("model", "must be gpt or llama, got '" + p.model + "'");
      if (p.model == "llama") {
        p.kv_heads = r.integer("kv_heads", 1, 1 << 16);
        p.ffn_width = r.integer("ffn_width", 1, 1 << 26);
      }
      p.width = r.integer("width", 1, 1 << 24);
      p.seq_len = r.integer("seq_len", 1, 1 << 24);
      p.heads = r.integer("heads", 1, 1 << 16);
      p.vocab = r.integer("vocab", 1, 1 << 30);
      p.micro_batch = r.integer("micro_batch", 1, 1 << 20);
      p.tp = r.integer("tp", 1, 1 << 16, 1);
      p.forward_s = r.number("forward_ms", 0, 1e9) * 1e-3;
      p.backward_s = r.number("backward_ms", 0, 1e9) * 1e-3;
      p.input_s = r.number("input_ms", 0, 1e9, 0.0) * 1e-3;
      p.weight_s = r.number("weight_ms", 0, 1e9, 0.0) * 1e-3;
      p.activation_bytes = r.number("activation_mb", 0, 1e12, 0.0) * 1e6;
      p.loaded_slowdown = r.number("loaded_slowdown", 1, 1e3, 1.0);
      p.action_s = r.number("action_ms", 0, 1e9, 0.0) * 1e-3;
      c.blocks.push_back(p);
    }
  }
  if (root.contains("optimizer")) {
    Reader o(section(root, "optimizer", origin), origin, "optimizer");
    c.optimizer_s_per_param = o.number("ns_per_param", 0, 1e9) * 1e-9;
  }
  return c;
}

std::string this_cpu() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) return "";
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

std::string other_cpu_warning(const Cluster& c) {
  if (!c.shared || c.cpu.empty()) return "";
  const std::string here = this_cpu();
  if (here.empty() || here == c.cpu) return "";
  return detail::concat(
      "warning: ", c.origin, " was profiled on '", c.cpu, "' but this machine is '", here,
      "'; its times may not hold here (loom profile --out FILE measures this one)");
}

Cluster load_cluster(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    LOOM_USAGE("cluster file '", path,
               std::filesystem::is_directory(path, ec) ? "' is a folder" : "' not found",
               "; pass one of clusters/*.toml or write one with loom profile --out FILE");
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) LOOM_USAGE("cluster file '", path, "' cannot be read; check its permissions");
  return parse_cluster(text.str(), path);
}

std::string to_toml(const Cluster& c) {
  std::ostringstream os;
  os << "name = " << quoted(c.name) << "\n";
  if (!c.note.empty()) os << "note = " << quoted(c.note) << "\n";
  os << "\n[node]\ndevices = " << c.devices_per_node << "\n";
  if (c.shared) os << "shared = true\n";
  // A profile describes the processor it ran on: the one writing the file.
  const std::string cpu = c.cpu.empty() && c.shared ? this_cpu() : c.cpu;
  if (!cpu.empty()) os << "cpu = " << quoted(cpu) << "\n";
  if (c.oversubscribed != 1) os << "oversubscribed = " << num(c.oversubscribed) << "\n";
  if (c.runtime_cpu != 1) os << "runtime_cpu = " << num(c.runtime_cpu) << "\n";
  os << "\n[device]\nmemory_gb = " << num(c.memory_bytes / 1e9)
     << "\nmemory_bandwidth_gbs = " << num(c.memory_bandwidth / 1e9)
     << "\nprecision = " << quoted(c.precision) << "\npeak_tflops = { ";
  bool first = true;
  for (const auto& [k, v] : c.peak_flops) {
    os << (first ? "" : ", ") << k << " = " << num(v / 1e12);
    first = false;
  }
  os << " }\n\n[efficiency]\ngemm_size = [";
  for (size_t i = 0; i < c.gemm_size.size(); ++i) os << (i ? ", " : "") << num(c.gemm_size[i]);
  os << "]\ngemm = [";
  for (size_t i = 0; i < c.gemm_efficiency.size(); ++i)
    os << (i ? ", " : "") << num(c.gemm_efficiency[i]);
  os << "]\n";
  if (c.gemm_in_training != 1) os << "gemm_in_training = " << num(c.gemm_in_training) << "\n";
  os << "elementwise = " << num(c.elementwise_efficiency) << "\n";
  if (c.elementwise_in_training != 1)
    os << "elementwise_in_training = " << num(c.elementwise_in_training) << "\n";
  if (!c.calibrated.empty()) os << "calibrated = " << quoted(c.calibrated) << "\n";
  write_attention(os, c.attention);
  if (c.tp_overlap > 0) os << "tp_overlap = " << num(c.tp_overlap) << "\n";
  auto link = [&](const char* name, const Link& l) {
    os << "\n[" << name << "]\nbandwidth_gbs = " << num(l.bandwidth / 1e9)
       << "\nefficiency = " << num(l.efficiency) << "\nlatency_us = " << num(l.latency * 1e6)
       << "\n";
  };
  link("intra", c.intra);
  link("inter", c.inter);
  if (c.optimizer_s_per_param > 0)
    os << "\n[optimizer]\nns_per_param = " << num(c.optimizer_s_per_param * 1e9) << "\n";
  for (const BlockProfile& b : c.blocks)
    os << "\n[[block]]\nkind = " << quoted(b.kind)
       << (b.model != "gpt"
               ? "\nmodel = " + quoted(b.model) + "\nkv_heads = " + std::to_string(b.kv_heads) +
                     "\nffn_width = " + std::to_string(b.ffn_width)
               : std::string())
       << "\nwidth = " << b.width << "\nseq_len = " << b.seq_len << "\nheads = " << b.heads
       << "\nvocab = " << b.vocab << "\nmicro_batch = " << b.micro_batch
       << (b.tp != 1 ? "\ntp = " + std::to_string(b.tp) : std::string())
       << "\nforward_ms = " << num(b.forward_s * 1e3)
       << "\nbackward_ms = " << num(b.backward_s * 1e3) << "\n"
       << (b.input_s > 0 && b.weight_s > 0 ? "input_ms = " + num(b.input_s * 1e3) +
                                                 "\nweight_ms = " + num(b.weight_s * 1e3) + "\n"
                                           : std::string())
       << (b.activation_bytes > 0 ? "activation_mb = " + num(b.activation_bytes / 1e6) + "\n"
                                  : std::string())
       << (b.loaded_slowdown != 1 ? "loaded_slowdown = " + num(b.loaded_slowdown) + "\n"
                                  : std::string())
       << (b.action_s > 0 ? "action_ms = " + num(b.action_s * 1e3) + "\n" : std::string());
  return os.str();
}

}  // namespace loom::plan

#include "loom/train/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "loom/common/error.h"

namespace loom::train {
namespace fs = std::filesystem;

std::string manifest_to_json(const Manifest& m) {
  std::ostringstream os;
  os << "{\"format\": \"loom-checkpoint-1\", \"step\": " << m.step << ", \"world\": " << m.world
     << ", \"dp\": " << m.dp << ", \"pp\": " << m.pp << ", \"loops\": " << m.loops
     << ", \"dp_mode\": \"" << m.dp_mode << "\", \"model\": \"" << m.model_kind
     << "\", \"schedule\": \"" << m.schedule << "\"}\n";
  return os.str();
}

namespace {

std::string field(const std::string& json, const std::string& key, const std::string& file) {
  std::smatch mt;
  std::regex re("\"" + key + "\"\\s*:\\s*(\"([^\"]*)\"|(-?[0-9]+))");
  if (!std::regex_search(json, mt, re))
    LOOM_USAGE("checkpoint manifest '", file, "' lacks \"", key,
               "\"; it is corrupt or not a loom checkpoint");
  return mt[2].matched ? mt[2].str() : mt[3].str();
}

}  // namespace

Manifest read_manifest(const std::string& path, std::string* step_dir) {
  fs::path dir(path);
  if (!fs::exists(dir / "manifest.json") && fs::exists(dir / "latest")) {
    std::ifstream f(dir / "latest");
    std::string name;
    std::getline(f, name);
    dir = dir / name;
  }
  fs::path file = dir / "manifest.json";
  std::ifstream f(file);
  if (!f)
    LOOM_USAGE("no checkpoint at '", path, "' (", file.string(),
               " not found); pass the run's checkpoint folder to --resume");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string json = ss.str();
  Manifest m;
  m.step = std::stoll(field(json, "step", file));
  m.world = std::stoi(field(json, "world", file));
  m.dp = std::stoi(field(json, "dp", file));
  m.pp = std::stoi(field(json, "pp", file));
  m.loops = std::stoi(field(json, "loops", file));
  m.dp_mode = field(json, "dp_mode", file);
  m.model_kind = field(json, "model", file);
  m.schedule = field(json, "schedule", file);
  if (step_dir) *step_dir = dir.string();
  return m;
}

void write_file_atomic(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << content;
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("cannot write '" + path + "'");
    }
  }
  fs::rename(tmp, path);
}

}  // namespace loom::train
